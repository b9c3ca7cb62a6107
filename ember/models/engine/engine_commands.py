"""What the event loop sends the engine thread (``AsyncEngine``'s queue), and where each
request's outputs go back: plain records, so the thread and the loop share no other state."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ember.models.engine.engine_types import FlushResult, PreparedRequest, RequestOutput


@dataclass(slots=True)
class AddRequest:
    request_id: str
    request: PreparedRequest


@dataclass(slots=True)
class AbortRequest:
    request_id: str
    reason: str = "abort"
    left: bool = False  # its stream was closed: the id is draining until the engine lets it go


class StopEngine:
    pass


@dataclass(slots=True)
class FlushCache:
    """Drop the prefix cache once the engine is idle, waiting until ``deadline`` at most."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[FlushResult]
    deadline: float  # time.monotonic()


class WakeEngine:
    """Nothing to apply: an announcement ended, so a hold re-checks what it waits for."""


@dataclass(slots=True)
class OutputStream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[RequestOutput | BaseException]


# Everything the engine thread's queue carries.
Command = AddRequest | AbortRequest | WakeEngine | FlushCache | StopEngine


def resolve_flush(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[FlushResult],
    outcome: FlushResult | BaseException,
) -> None:
    """Settle a flush's future on its own loop, from the engine thread."""

    def settle() -> None:
        if future.done():
            return  # the caller went away
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:
        pass  # that event loop is closed


def put_all(items: list[tuple[OutputStream, RequestOutput]]) -> None:
    """On a stream's loop: queue one step's outputs for their streams."""
    for stream, output in items:
        stream.queue.put_nowait(output)
