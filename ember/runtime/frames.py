"""Moving frames over the isolate socket: write coalescing out, length-prefix splitting in.

``protocol.py`` says what a frame holds; this module only cuts a byte stream into frames and
batches outgoing ones, so neither side of the socket writes or buffers more than it must.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import msgpack

from ember.errors import BindingError, ProtocolError
from ember.runtime.fields import MAX_FRAME_BYTES
from ember.runtime.protocol import FRAME_LENGTH, Message


class FrameWriter:
    """Coalesces the frames written during one event-loop iteration into one ``write``.

    Under concurrency this turns many small writes (each a syscall that may wake the peer and
    hand it the CPU) into one; a lone frame goes out at the end of the current iteration.
    """

    def __init__(self, max_buffered: int | None = None, on_overflow: Any = None) -> None:
        self.transport: Any = None
        self._parts: list[bytes] = []
        self.queued_bytes = 0  # in _parts: code that never yields to the loop lets them pile up
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None  # (get_running_loop costs a getpid)
        # The flush runs in a context of its own, not the request's that queued a frame: the
        # isolate's CPU-limit interrupt raises only in request context, so it can never cut
        # the flush between taking the frames and writing them.
        self._context = contextvars.Context()
        self._max_buffered = max_buffered
        self._on_overflow = on_overflow
        # The same bytes as ``encode``, without building a Packer per frame.
        self._pack = msgpack.Packer(use_bin_type=True).pack

    def send(self, message: Message) -> None:
        """Queue one frame; BindingError for one past ``MAX_FRAME_BYTES`` (the peer would
        refuse it and drop the connection, and every request on it with it)."""
        payload = self._pack([message.TAG, *message])
        if len(payload) > MAX_FRAME_BYTES:
            raise BindingError(
                f"a {type(message).__name__} of {len(payload)} bytes is past the "
                f"{MAX_FRAME_BYTES}-byte frame limit: a binding call's arguments are at most "
                "about 1 MiB (larger values go as a body or stream)"
            )
        self._parts.append(FRAME_LENGTH.pack(len(payload)) + payload)
        self.queued_bytes += 4 + len(payload)
        if not self._scheduled:
            self._scheduled = True
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush, context=self._context)

    def arm(self) -> None:
        """Schedule the flush now, before any frame is queued: it then runs after the callbacks
        (tasks' steps) already scheduled, in the same loop iteration as they, not the next."""
        if not self._scheduled:
            self._scheduled = True
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush, context=self._context)

    def take(self) -> bytes:
        """The frames queued so far, removed from the queue: for a caller that writes them itself
        because the loop cannot run (``isolate/blocking.py``); the scheduled flush finds none."""
        parts, self._parts = self._parts, []
        self.queued_bytes = 0
        return b"".join(parts)

    def _flush(self) -> None:
        self._scheduled = False
        parts, self._parts = self._parts, []
        self.queued_bytes = 0
        transport = self.transport
        if parts and transport is not None and not transport.is_closing():
            transport.write(parts[0] if len(parts) == 1 else b"".join(parts))
            limit = self._max_buffered
            if limit is not None and transport.get_write_buffer_size() > limit:
                self._on_overflow()  # the peer stopped reading


class FrameDecoder:
    """Splits a byte stream into frame payloads, refusing oversized frames before buffering."""

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every complete payload."""
        self._buffer += data
        frames: list[bytes] = []
        buffer = self._buffer
        offset = 0
        while len(buffer) - offset >= 4:
            (length,) = FRAME_LENGTH.unpack_from(buffer, offset)
            if length > self._max:
                raise ProtocolError(f"frame of {length} bytes exceeds the {self._max}-byte limit")
            end = offset + 4 + length
            if len(buffer) < end:
                break
            frames.append(bytes(buffer[offset + 4 : end]))
            offset = end
        if offset:
            del buffer[:offset]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buffer)
