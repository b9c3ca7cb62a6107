"""Byte streams handed to handlers (KV ``get(type="stream")``, a model's server-sent events).

A ``ReadableStream`` is what Python Workers code receives for a JS stream: iterate it with
``async for``, read it whole with ``await stream.read_all()``, or hand it to ``Response(...)``,
which streams it to the client as it is produced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ember.bindings.base import ByteStream


class ReadableStream:
    """A one-pass stream of ``bytes`` chunks."""

    def __init__(self, source: ByteStream | bytes) -> None:
        self._source = source
        self._used = False

    @property
    def locked(self) -> bool:
        """True once iteration started (a stream can be read once)."""
        return self._used

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self._used:
            raise TypeError("This ReadableStream is locked: it has already been read")
        self._used = True
        return self._iterate()

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
        the client (the source is still the supervisor's stream, nothing was read here).
        """
        if self._used:
            return None
        self._used = True
        return self._source

    async def read_all(self) -> bytes:
        """Read every remaining chunk and join them."""
        return b"".join([chunk async for chunk in self])

    async def cancel(self) -> None:
        """Stop the stream early; the producer (a binding service) is cancelled too."""
        self._used = True
        if not isinstance(self._source, bytes):
            await self._source.aclose()

    async def aclose(self) -> None:
        """Alias of ``cancel`` (async-generator protocol)."""
        await self.cancel()

    def __repr__(self) -> str:
        return f"<ReadableStream locked={self._used}>"
