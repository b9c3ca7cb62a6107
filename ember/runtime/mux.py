"""Byte streams multiplexed over one isolate socket, with per-stream credit (flow control).

Used on both sides. Each side numbers the streams it *sends* (``OutStream``) and announces the
id in the message that opens it; the peer registers the matching ``InStream`` when it sees that
message. A receiver grants ``WINDOW`` bytes up front and returns credit as the consumer reads, so
a slow consumer (a slow HTTP client, a handler that does not read its body) stops the producer
instead of filling memory, and one stream never blocks another.

The receiving side polices the peer: data past the granted window, or for a stream id never
announced, is a violation (``on_violation``; the supervisor kills the isolate). Data for a stream
this side already abandoned is dropped silently: the peer may not have seen the abandonment yet.

A *lazy* stream starts with no credit: nothing flows until the receiver reads it (its first read
grants the window). Binding replies are lazy so that a handler that returns a reply stream
unread as its response can hand it back instead (``PipeResponse``): the supervisor then sends
the reply to the HTTP client itself, and no chunk crosses the isolate at all.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from ember.errors import ProtocolError
from ember.runtime.fields import MAX_CHUNK_BYTES
from ember.runtime.protocol import Abort, Credit, Data, End, Message

WINDOW = 256 * 1024
_CREDIT_BATCH = WINDOW // 2


class StreamAborted(Exception):
    """The sender ended the stream abnormally (or the connection closed)."""


class InStream:
    """Receiving end of one stream: iterate it for chunks; credit flows back as you read."""

    def __init__(
        self,
        sid: int,
        send: Callable[[Message], None],
        on_abandon: Callable[[], None] | None = None,
        lazy: bool = False,
    ) -> None:
        self.sid = sid
        self._send = send
        self._on_abandon = on_abandon
        self._chunks: deque[bytes] = deque()
        self._lazy = lazy  # no credit granted yet: the window goes out on the first read
        self._allowance = 0 if lazy else WINDOW  # bytes the peer may send before the next credit
        self._unacked = 0  # bytes consumed but not yet credited back
        self._ended = False
        self._error: str | None = None
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self.received = 0

    # -- producer side (called by the connection when frames arrive) --------------------------

    def push(self, data: bytes) -> None:
        """A Data frame arrived. Raises ProtocolError past the window or after the end."""
        if self._ended:
            if self._error is None:
                raise ProtocolError(f"data after the end of stream {self.sid}")
            return  # failed on this side; the peer has not noticed yet
        self._allowance -= len(data)
        if self._allowance < 0:
            raise ProtocolError(f"stream {self.sid} sent past its credit window")
        self.received += len(data)
        if self._closed:
            return
        self._chunks.append(data)
        self._wake()

    def finish(self) -> None:
        """An End frame arrived."""
        self._ended = True
        self._wake()

    def fail(self, reason: str) -> None:
        """An Abort frame arrived, or the connection closed."""
        if not self._ended:
            self._ended = True
            self._error = reason
        self._wake()

    @property
    def ended(self) -> bool:
        """True once End or Abort arrived."""
        return self._ended

    @property
    def untouched(self) -> bool:
        """A lazy stream nobody read or closed yet: its sender still holds every byte."""
        return self._lazy and not self._closed and not self._ended

    # -- consumer side ------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        self._start_reading()
        while not self._chunks:
            if self._ended:
                if self._error is not None:
                    raise StreamAborted(self._error)
                raise StopAsyncIteration
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._take()

    def read_nowait(self) -> bytes | None:
        """For a reader that cannot await (sync HTTP clients, ``isolate/blocking.py``): the next
        chunk if one is buffered, ``b""`` at the end, None while the caller must wait for more
        frames. Credit flows back exactly as with ``async for``."""
        self._start_reading()
        if self._chunks:
            return self._take()
        if self._ended and self._error is not None:
            raise StreamAborted(self._error)
        return b"" if self._ended or self._closed else None

    def _start_reading(self) -> None:
        if self._lazy:
            self._lazy = False
            if not self._ended and not self._closed:
                self._allowance += WINDOW
                self._send(Credit(self.sid, WINDOW))

    def _take(self) -> bytes:
        chunk = self._chunks.popleft()
        self._unacked += len(chunk)
        if self._unacked >= _CREDIT_BATCH and not self._ended:
            self._send(Credit(self.sid, self._unacked))
            self._allowance += self._unacked
            self._unacked = 0
        return chunk

    async def aclose(self) -> None:
        """Stop reading. If the stream had not ended, tell the owner (``on_abandon``)."""
        self.close()

    def close(self) -> None:
        """``aclose`` for callers that cannot await."""
        if self._closed:
            return
        self._closed = True
        self._chunks.clear()
        if not self._ended and self._on_abandon is not None:
            self._on_abandon()
        self._wake()

    async def wait_ended(self) -> str | None:
        """Wait, without reading, until the sender ends the stream: None, or the abort reason.

        For a stream handed back to its sender (``untouched`` when handed over, so no credit
        was ever granted and no data can arrive): the sender's End or Abort says it is over.
        """
        self._lazy = False  # handed over: never grant credit for it any more
        while not self._ended:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._error

    async def read_all(self, limit: int | None = None) -> bytes:
        """Every remaining chunk joined; ProtocolError-free, raises ValueError past ``limit``."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self:
            size += len(chunk)
            if limit is not None and size > limit:
                await self.aclose()
                raise ValueError(f"body exceeds {limit} bytes")
            parts.append(chunk)
        return b"".join(parts)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class OutStream:
    """Sending end of one stream: ``send`` waits for credit; ``end`` or ``abort`` closes it."""

    def __init__(self, sid: int, send: Callable[[Message], None], lazy: bool = False) -> None:
        self.sid = sid
        self._send = send
        self._credit = 0 if lazy else WINDOW
        self._waiter: asyncio.Future[None] | None = None
        self._closed: str | None = None
        self.sent = 0
        # A lazy stream's receiver decides how it is consumed: its first credit (it reads) or a
        # hand-back (``claim``); ``started`` resolves with None for a read, else the claim.
        self.started: asyncio.Future[object] | None = (
            asyncio.get_running_loop().create_future() if lazy else None
        )

    def claim(self, owner: object) -> bool:
        """The receiver handed this lazy stream back unread; False if it was read already."""
        if self.started is None or self.started.done() or self._closed is not None:
            return False
        self.started.set_result(owner)
        return True

    async def send(self, data: bytes) -> None:
        """Send ``data`` in chunks, waiting for credit. Raises StreamAborted if closed."""
        view = memoryview(data)
        for start in range(0, len(view), MAX_CHUNK_BYTES):
            chunk = bytes(view[start : start + MAX_CHUNK_BYTES])
            while self._credit < len(chunk):
                if self._closed is not None:
                    raise StreamAborted(self._closed)
                self._waiter = asyncio.get_running_loop().create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
            if self._closed is not None:
                raise StreamAborted(self._closed)
            self._credit -= len(chunk)
            self.sent += len(chunk)
            self._send(Data(self.sid, chunk))

    def send_nowait(self, chunk: bytes) -> bool:
        """Send one chunk (at most ``MAX_CHUNK_BYTES``) if the window allows it now; False if
        the caller must wait for credit. Raises StreamAborted if closed. For senders that cannot
        await (``isolate/blocking.py``)."""
        if self._closed is not None:
            raise StreamAborted(self._closed)
        if self._credit < len(chunk):
            return False
        self._credit -= len(chunk)
        self.sent += len(chunk)
        self._send(Data(self.sid, chunk))
        return True

    def add_credit(self, amount: int) -> None:
        """A Credit frame arrived."""
        self._credit += amount
        if self.started is not None and not self.started.done():
            self.started.set_result(None)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def end(self) -> None:
        """Finish normally."""
        if self._closed is None:
            self._closed = "ended"
            self._send(End(self.sid))

    def abort(self, reason: str) -> None:
        """Finish abnormally (the receiver sees StreamAborted)."""
        if self._closed is None:
            self._closed = reason
            self._send(Abort(self.sid, reason[:1000]))

    def detach(self, reason: str) -> None:
        """The peer is gone: wake a blocked sender without writing anything."""
        if self._closed is None:
            self._closed = reason
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        if self.started is not None and not self.started.done():
            self.started.set_exception(StreamAborted(reason))
            self.started.exception()  # retrieved: its owner may be gone already

    @property
    def closed(self) -> bool:
        """True once ended, aborted or detached."""
        return self._closed is not None


class Mux:
    """The stream tables of one side of one connection."""

    def __init__(self, send: Callable[[Message], None]) -> None:
        self._send = send
        self._next_sid = 0
        self._out: dict[int, OutStream] = {}
        self._in: dict[int, InStream] = {}
        self._max_in_sid = 0

    def open_out(self, lazy: bool = False) -> OutStream:
        """A new outgoing stream; announce ``stream.sid`` in the message that opens it."""
        self._next_sid += 1
        stream = OutStream(self._next_sid, self._send, lazy)
        self._out[stream.sid] = stream
        return stream

    def out_stream(self, sid: int) -> OutStream | None:
        """The outgoing stream ``sid`` if still open (None once released)."""
        return self._out.get(sid)

    @property
    def last_out_sid(self) -> int:
        """The highest outgoing stream id ever opened (ids above it never existed)."""
        return self._next_sid

    def open_counts(self) -> tuple[int, int]:
        """(outgoing, incoming) streams registered now: a leak shows as a count that stays up."""
        return len(self._out), len(self._in)

    def release_out(self, stream: OutStream) -> None:
        """Forget a finished outgoing stream."""
        self._out.pop(stream.sid, None)

    def expect_in(
        self, sid: int, on_abandon: Callable[[], None] | None = None, lazy: bool = False
    ) -> InStream:
        """Register the peer's stream ``sid``, announced by a message that just arrived."""
        if sid <= self._max_in_sid:
            raise ProtocolError(f"stream id {sid} reused or out of order")
        self._max_in_sid = sid
        stream = InStream(sid, self._send, on_abandon, lazy)
        self._in[sid] = stream
        return stream

    def release_in(self, stream: InStream) -> None:
        """Forget an incoming stream (late frames for it are then dropped)."""
        self._in.pop(stream.sid, None)

    def on_frame(self, message: Data | End | Abort | Credit) -> None:
        """Route a stream frame. Raises ProtocolError for ids the peer never announced."""
        if isinstance(message, Credit):
            out = self._out.get(message.sid)
            if out is not None:
                out.add_credit(message.amount)
            elif message.sid > self._next_sid:
                raise ProtocolError(f"credit for stream {message.sid}, which was never opened")
            return
        stream = self._in.get(message.sid)
        if stream is None:
            if message.sid > self._max_in_sid or message.sid == 0:
                raise ProtocolError(f"frame for stream {message.sid}, which was never announced")
            return  # abandoned here; the peer had not noticed yet
        if isinstance(message, Data):
            stream.push(message.data)
        elif isinstance(message, End):
            stream.finish()
            self._in.pop(message.sid, None)
        else:
            stream.fail(message.reason)
            self._in.pop(message.sid, None)

    def close(self, reason: str) -> None:
        """The connection is gone: fail every incoming stream, wake every sender."""
        for stream in list(self._in.values()):
            stream.fail(reason)
        for out in list(self._out.values()):
            out.detach(reason)
        self._in.clear()
        self._out.clear()
