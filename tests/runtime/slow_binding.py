"""A test binding type, registered through the registry like any other (no runtime edits).

Its service waits, echoes, streams forever, or streams seeded random bytes (``random``), and
records starts, cancellations and stream closes in a shared ``Tracker`` so tests can see
cancellation arrive at the service.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

from ember.bindings.base import (
    BindingChannel,
    BindingService,
    BindingSpec,
    BindingType,
    CallContext,
    ServiceHost,
    StreamReply,
    binding_name,
)
from ember.bindings.streams import ReadableStream
from ember.config import ConfigSection

TRACKER_KEY = "tests.slow.tracker"


class Tracker:
    """Counts per event name."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def get(self, name: str) -> int:
        return self.counts.get(name, 0)


class SlowClient:
    """``env.SLOW`` in the isolate."""

    def __init__(self, spec: BindingSpec, channel: BindingChannel) -> None:
        self._name = spec.name
        self._channel = channel

    async def wait(self, tag: str = "") -> Any:
        return (await self._channel.call(self._name, "wait", [tag])).value

    async def echo(self, *values: Any) -> Any:
        return (await self._channel.call(self._name, "echo", list(values))).value

    async def stream(self, tag: str = "") -> ReadableStream:
        reply = await self._channel.call(self._name, "stream", [tag])
        assert reply.stream is not None
        return ReadableStream(reply.stream)

    async def stall(self, tag: str = "") -> ReadableStream:
        reply = await self._channel.call(self._name, "stall", [tag])
        assert reply.stream is not None
        return ReadableStream(reply.stream)

    async def held(self, tag: str = "") -> ReadableStream:
        reply = await self._channel.call(self._name, "held", [tag])
        assert reply.stream is not None
        return ReadableStream(reply.stream)

    async def random(self, seed: int, chunks: int) -> ReadableStream:
        reply = await self._channel.call(self._name, "random", [seed, chunks])
        assert reply.stream is not None
        return ReadableStream(reply.stream)


def random_chunks(seed: int, chunks: int) -> list[bytes]:
    """What ``random`` streams: ``chunks`` chunks of random sizes (1 B to 100 KiB) and bytes."""
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice([1, 7, 300, 4096, 70_000, 100_000])) for _ in range(chunks)]


class SlowService(BindingService):
    """Supervisor side."""

    def __init__(self, spec: BindingSpec, host: ServiceHost) -> None:
        self.tracker = host.shared(TRACKER_KEY, Tracker)

    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object:
        tag = args[0] if args else ""
        if method == "echo":
            return args
        if method == "wait":
            self.tracker.add(f"wait-started:{tag}")
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.tracker.add(f"wait-cancelled:{tag}")
                raise
        if method == "stream":
            return StreamReply(head={"tag": tag}, chunks=self._ticks(tag))
        if method == "stall":
            return StreamReply(head={"tag": tag}, chunks=self._stall(tag))
        if method == "held":
            return StreamReply(head={"tag": tag}, chunks=Held(self.tracker, tag))
        if method == "random":
            return StreamReply(head={}, chunks=self._random(int(args[0]), int(args[1])))
        raise ValueError(method)

    async def _ticks(self, tag: str) -> AsyncIterator[bytes]:
        self.tracker.add(f"stream-started:{tag}")
        try:
            for i in range(100_000):
                yield f"data: {i}\n\n".encode()
                await asyncio.sleep(0.01)
        finally:
            self.tracker.add(f"stream-closed:{tag}")

    async def _stall(self, tag: str) -> AsyncIterator[bytes]:
        """One event, then nothing: only a cancellation ends it (a model in a long prefill)."""
        try:
            yield b"data: 0\n\n"
            await asyncio.sleep(3600)
        finally:
            self.tracker.add(f"stream-closed:{tag}")

    async def _random(self, seed: int, chunks: int) -> AsyncIterator[bytes]:
        for chunk in random_chunks(seed, chunks):
            yield chunk
            await asyncio.sleep(0)


class Held:
    """As ``stall`` (one event, then only a cancellation ends it), but its close is recorded
    (``stream-closed:TAG``) even if nobody read it: an async generator closed before its first
    read never runs its ``finally``, and a stream can be handed back and dropped unread."""

    def __init__(self, tracker: Tracker, tag: str) -> None:
        self._tracker = tracker
        self._tag = tag
        self._sent = False
        self._closed = False

    def __aiter__(self) -> Held:
        return self

    async def __anext__(self) -> bytes:
        if not self._sent:
            self._sent = True
            return b"data: 0\n\n"
        await asyncio.sleep(3600)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._tracker.add(f"stream-closed:{self._tag}")


def parse(section: ConfigSection) -> tuple[BindingSpec, ...]:
    if not isinstance(section.value, dict):
        raise section.error(None, section.value, "a mapping such as {binding: SLOW}")
    name = binding_name(section, section.value, "")
    return (BindingSpec("slow", name, "tests.runtime.slow_binding:SlowClient"),)


BINDING_TYPE = BindingType(
    kind="slow", config_key="slow", parse=parse, service="tests.runtime.slow_binding:SlowService"
)
