"""``PooledStream``: a replica's event stream that holds its pool slot until it ends.

``ModelPool.stream`` returns one; whoever reads it (the AI gateway) never has to give the slot
back by hand: the end of the stream, a failure, ``aclose`` or the request's deadline does.
``interrupt`` ends it from outside (``ember serve``'s drain ran out): the replica stops, and
the reader's next read raises a 3040 naming why, which the gateway sends as the stream's last
event, so the caller's stream ends on an event boundary instead of being cut mid-event.
"""

from __future__ import annotations

import asyncio

from ember.models.pool import errors
from ember.models.pool.lease import TIMED_OUT
from ember.models.pool.upstream import EventStream, invalid_json

__all__ = ["TIMED_OUT", "PooledStream"]


class PooledStream:
    """A replica's event stream that gives its slot back when it ends, however it ends."""

    def __init__(
        self, events: EventStream, deadline: float, open_streams: set[PooledStream] | None = None
    ) -> None:
        self._events = events
        self._timer = asyncio.get_running_loop().call_later(deadline, self._expire)
        self.timed_out = False
        self.interrupted: str | None = None  # why ``interrupt`` ended it
        self.replica = events.lease.replica
        self._open = open_streams if open_streams is not None else set()
        self._open.add(self)  # the pool's, for ``interrupt`` at shutdown

    def _expire(self) -> None:
        self.timed_out = True
        self._events.lease.outcome(TIMED_OUT)
        self._events.lease.fail(TIMED_OUT)
        # Whether or not anybody still reads it, the replica stops and the slot is freed.
        self._closer = asyncio.ensure_future(self.aclose())

    def __aiter__(self) -> PooledStream:
        return self

    async def __anext__(self) -> str:
        try:
            data = await self._events.__anext__()
        except StopAsyncIteration:
            self._events.lease.outcome(None)
            await self.aclose()
            raise
        except errors.UpstreamFailed as exc:
            failure = self._failure(exc)
            await self.aclose()
            raise failure from None
        if data == "[DONE]":  # the consumer may stop reading here: the answer is complete
            self._events.lease.outcome(None)
        return data

    async def next_batch(self) -> list[str]:
        """Every event available now (see ``EventStream.next_batch``); [] at the end."""
        try:
            batch = await self._events.next_batch()
        except errors.UpstreamFailed as exc:
            failure = self._failure(exc)
            await self.aclose()
            raise failure from None
        if not batch:
            self._events.lease.outcome(None)
            await self.aclose()
        elif batch[-1] == "[DONE]":  # the consumer may stop reading here: the answer is complete
            self._events.lease.outcome(None)
        return batch

    def _failure(self, exc: errors.UpstreamFailed) -> errors.UpstreamFailed:
        """What the reader gets when the events failed; the replica's outcome if its fault."""
        if self.interrupted is not None:  # not the replica's fault: its record stays clean
            return errors.model_unavailable(self.replica.model_id, self.interrupted)
        self._events.lease.outcome(exc.description)
        return errors.timed_out() if self.timed_out else exc

    def invalid_event(self, data: str) -> errors.UpstreamFailed:
        """The failure of an event a translator could not parse (``errors.InvalidEvent``): the
        replica's fault, as when ``upstream.py`` finds one."""
        failure = invalid_json(self._events.lease, data)
        self._events.lease.outcome(failure.description)
        return failure

    def interrupt(self, reason: str) -> None:
        """End the stream from outside: the replica stops generating, the slot is freed once
        the reader sees it, and the next read raises a 3040 saying ``reason``. Events already
        received are still read first: the stream ends between two of them."""
        if self.interrupted is None and not self.timed_out:
            self.interrupted = reason
            self._events.lease.fail(reason)

    @property
    def renamed(self) -> bool:
        """True when the replica calls the model by another name than the pool's id."""
        return self.replica.served_name != self.replica.model_id

    async def aclose(self) -> None:
        """Stop (the replica aborts the generation) and give the slot back; idempotent."""
        self._timer.cancel()
        self._open.discard(self)
        await self._events.aclose()
        self._events.lease.release()
