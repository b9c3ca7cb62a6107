"""Byte streams handed to handlers (KV ``get(type="stream")``, a model's server-sent events).

A ``ReadableStream`` is what Python Workers code receives for a JS stream, and it answers the
same ways: iterate it with ``async for``, take a reader (``reader = stream.getReader()``, then
``result = await reader.read()`` until ``result.done``, ``reader.releaseLock()``,
``reader.cancel()``), split it with ``tee()``, read it whole with ``await stream.read_all()``, or
hand it to ``Response(...)``, which streams it to the client as it is produced.

Like a JS stream it is read once, by one consumer at a time: a reader holds the lock until
``releaseLock()`` (another reader then continues where it stopped); ``async for``, ``tee()``,
``cancel()`` and ``Response(stream)`` take it for good; ``cancel()`` while a reader holds it
is a TypeError, as in JS. ``pipeTo``/``pipeThrough`` are left out:
they need WritableStream/TransformStream, which ember's Python API does not have.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ember.bindings.base import ByteStream
from ember.bindings.jsdict import JsDict
from ember.js_errors import JsTypeError

LOCKED = "This ReadableStream is locked: it has already been read or has a reader"


class ReadableStream:
    """A one-pass stream of ``bytes`` chunks."""

    def __init__(self, source: ByteStream | bytes) -> None:
        self._source = source
        self._used = False  # taken for good (async for, tee, cancel, hand_over)
        self._reader: ReadableStreamDefaultReader | None = None
        self._chunks: AsyncIterator[bytes] | None = None  # shared by successive readers

    @property
    def locked(self) -> bool:
        """True while a reader holds the stream, and once it was taken for good."""
        return self._used or self._reader is not None

    def _take(self) -> None:
        # Started readers (then released) may hand over too: what is left continues.
        if self.locked:
            raise JsTypeError(LOCKED)
        self._used = True

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._take()
        return self._rest()

    def getReader(self) -> ReadableStreamDefaultReader:  # noqa: N802 - the JS name scripts use
        """A reader that holds this stream until ``releaseLock()`` (JS ``getReader()``)."""
        if self.locked:
            raise JsTypeError(LOCKED)
        self._reader = ReadableStreamDefaultReader(self)
        return self._reader

    def tee(self) -> tuple[ReadableStream, ReadableStream]:
        """Two streams that each get every chunk (JS ``tee()``): each chunk is pulled from
        this one once, when the faster branch wants it, and kept for the other (unbounded, as
        in JS, if one branch is never read). The source is cancelled when both branches are."""
        self._take()
        tee = _Tee(self._rest(), self._source)
        return ReadableStream(_TeeBranch(tee, 0)), ReadableStream(_TeeBranch(tee, 1))

    async def _next(self) -> bytes | None:
        """The next chunk, or None at the end (used by the reader and ``_rest``)."""
        if self._chunks is None:
            self._chunks = self._iterate()
        try:
            return await anext(self._chunks)
        except StopAsyncIteration:
            return None

    async def _rest(self) -> AsyncIterator[bytes]:
        while (chunk := await self._next()) is not None:
            yield chunk

    async def _iterate(self) -> AsyncIterator[bytes]:
        if isinstance(self._source, bytes):
            if self._source:
                yield self._source
            return
        async for chunk in self._source:
            yield chunk

    def hand_over(self) -> ByteStream | bytes | None:
        """For the runtime: the unread source, locking this stream; None if already read.

        ``Response(stream)`` returned as is lets the runtime send a binding's reply straight to
        the client (the source is still the supervisor's stream, nothing was read here). After
        a released reader read part of it, the rest is handed over.
        """
        if self.locked:
            return None
        self._used = True
        if self._chunks is None:
            return self._source
        return _Rest(self)

    async def read_all(self) -> bytes:
        """Read every remaining chunk and join them."""
        return b"".join([chunk async for chunk in self])

    async def cancel(self, reason: object = None) -> None:
        """Stop the stream early; the producer (a binding service) is cancelled too.

        While a reader holds the stream this is a TypeError, as JS's ``cancel()`` rejects
        then: the holder stops it with ``reader.cancel()``, or releases it first."""
        if self._reader is not None:
            raise JsTypeError(
                "This ReadableStream is locked by a reader: call reader.cancel(), "
                "or reader.releaseLock() before stream.cancel()"
            )
        self._used = True
        await self._close_source()

    async def _close_source(self) -> None:
        if not isinstance(self._source, bytes):
            await self._source.aclose()

    async def aclose(self) -> None:
        """Close it whatever holds it (async-generator protocol, for the runtime's cleanup)."""
        self._used = True
        await self._close_source()

    def __repr__(self) -> str:
        return f"<ReadableStream locked={self.locked}>"


class ReadableStreamDefaultReader:
    """JS ``ReadableStreamDefaultReader``: ``read()``, ``releaseLock()``, ``cancel()``."""

    def __init__(self, stream: ReadableStream) -> None:
        self._stream: ReadableStream | None = stream
        self._done = False

    async def read(self) -> JsDict:
        """The next chunk as ``{done: False, value: bytes}``; ``{done: True, value: None}``
        at the end (and after ``cancel()``), as JS's ``read()`` resolves."""
        stream = self._require()
        chunk = None if self._done else await stream._next()
        if chunk is None:
            self._done = True
            return JsDict(done=True, value=None)
        return JsDict(done=False, value=chunk)

    def releaseLock(self) -> None:  # noqa: N802 - the JS name
        """Give the stream back: another reader (or ``async for``) may continue it."""
        stream = self._require()
        stream._reader = None
        self._stream = None

    async def cancel(self, reason: object = None) -> None:
        """Stop the stream and its producer; later reads are ``done``."""
        stream = self._require()
        self._done = True
        stream._used = True
        await stream._close_source()

    @property
    def closed(self) -> bool:
        """True once the stream ended or was cancelled (JS's ``closed`` settles then)."""
        return self._done

    def _require(self) -> ReadableStream:
        if self._stream is None:
            raise JsTypeError("This reader was released: call stream.getReader() again")
        return self._stream


class _Rest:
    """What a released reader left of a stream, as a ByteStream for ``Response(stream)``."""

    def __init__(self, stream: ReadableStream) -> None:
        self._stream = stream

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream._rest()

    async def aclose(self) -> None:
        await self._stream._close_source()


class _Tee:
    """The shared state of two tee branches: one pull from the source serves both."""

    def __init__(self, chunks: AsyncIterator[bytes], source: ByteStream | bytes) -> None:
        self._chunks = chunks
        self._source = source
        self._lock = asyncio.Lock()  # one pull at a time, so chunks keep their order
        self.buffers: tuple[list[bytes], list[bytes]] = ([], [])
        self.cancelled = [False, False]
        self.ended = False

    async def next(self, branch: int) -> bytes | None:
        buffer = self.buffers[branch]
        async with self._lock:
            if not buffer and not self.ended:
                try:
                    chunk = await anext(self._chunks)
                except StopAsyncIteration:
                    self.ended = True
                else:
                    for other, kept in enumerate(self.buffers):
                        if not self.cancelled[other]:
                            kept.append(chunk)
        return buffer.pop(0) if buffer else None

    async def cancel(self, branch: int) -> None:
        self.cancelled[branch] = True
        self.buffers[branch].clear()
        if all(self.cancelled) and not isinstance(self._source, bytes):
            await self._source.aclose()


class _TeeBranch:
    """One branch of a tee, as the ByteStream of its own ReadableStream."""

    def __init__(self, tee: _Tee, branch: int) -> None:
        self._tee = tee
        self._branch = branch

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        while (chunk := await self._tee.next(self._branch)) is not None:
            yield chunk

    async def aclose(self) -> None:
        await self._tee.cancel(self._branch)
