"""uvicorn's httptools HTTP protocol with a bound on the request head (line and headers).

Both servers use it: ``ember serve`` as it is, ``ember dev`` through its fast path
(``fasthttp.py`` subclasses it). Its cycles also write the handler's status text
and stream to HTTP/1.0 clients unchunked (``cycle.py``).

uvicorn's httptools protocol has no limit on header size: llhttp and httptools buffer a header
of any length until it ends. Anyone on the network could make ``ember serve`` hold a 30 MB
header per connection, and the server forwarded it to the worker, whose isolate died on the
frame over ``MAX_FRAME_BYTES`` ("crashed", 502) together with every other request it was
serving (in ``ember dev`` too, from a 2 MB header): one client cost a tenant its service and
every tenant memory. Cloudflare refuses request heads past 128 KB (``431``); so does ember now,
while they arrive, before they reach a worker.

The count starts with a request and covers every byte read until its headers are complete; a
read that would pass the bound is parsed only up to it, so a head past the bound never reaches
the application, however its bytes are split into reads.

A chunked body's trailers (header fields after its last chunk) are read by the same parser but
after the head: the bound counts, within a body, every byte since the last body byte (chunk
framing, a chunk's extension, trailers), and past it the answer is ``431`` and close. Trailers
are dropped: uvicorn appended them to the request's headers, which the application already had.

With a ``ConnectionGate`` (``connguard.py``) it also bounds time and numbers: the head must
arrive within ``head_timeout_s`` (else ``408`` and close, or a silent close if none of it came),
and a connection past the gate's caps is answered ``429``/``503`` and closed before it is read,
and each request body must arrive by its deadline (``bodyclock.py``: else ``408`` and close).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ember.runtime.bodyclock import BodyClock, HeldFlow, timeout_message
from ember.runtime.connguard import (
    ConnectionGate,
    ConnectionLimits,
    RateLimitedLog,
    Refusal,
    UncappedGate,
)
from ember.runtime.cycle import ServerCycle

MAX_HEAD_BYTES = 128 * 1024
_MESSAGE = (
    f"Request Header Fields Too Large: the request line and headers exceed "
    f"{MAX_HEAD_BYTES // 1024} KiB\n"
).encode("ascii")


class BoundedHeadProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` answering ``431`` to a request head over ``MAX_HEAD_BYTES``.

    A subclass that overrides ``on_headers_complete``, ``on_body`` or ``on_message_complete``
    without calling them here (``ember dev``'s fast path) calls ``_head_complete``,
    ``_body_arrived`` and ``_message_complete`` itself.
    """

    def __init__(self, *args: object, gate: ConnectionGate | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._in_head = True  # a request's head is being read (or the next one may start)
        self._head_bytes = 0  # bytes read since then
        self._framing_bytes = 0  # in a body: bytes read since its last body byte (or its head)
        self._head_read_body = 0  # body bytes parsed since the last head ended, in its read
        self._gate = gate
        self._counted = False  # the gate counted this connection (release it once)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_clock: BodyClock | None = None  # a body is being read past its head's read
        self._body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self._gate is None:
            return
        refusal = self._gate.admit(transport, self._address())
        if refusal is not None:
            self._answer_and_close(refusal.status, refusal.reason, _text(refusal))
            return
        self._counted = True
        self.flow = HeldFlow(transport, self.loop.time)  # uvicorn's, timing what it holds back
        self._arm_head_timer()  # a connection that never sends a byte is a head not arriving

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._end_body()
        if self._counted and self._gate is not None:
            self._counted = False
            self._gate.release(self.transport, self._address())
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            if self._head_timer is None:
                self._arm_head_timer()  # the first byte of a later request on a kept-alive one
        elif self._body_clock is not None:
            self._body_clock.received += len(data)
        # A read that would take the head past the bound is parsed only up to it: a head that
        # has not ended there is refused, even if its end came in the same read (asyncio hands
        # over up to 256 KiB at once); what follows an ended head is parsed as usual. Within a
        # body the same holds for what is not body (chunk framing, a chunk's extension, the
        # trailers after the last chunk): past the bound since the last body byte, refused.
        while True:
            in_head = self._in_head
            used = self._head_bytes if in_head else self._framing_bytes
            if used + len(data) <= MAX_HEAD_BYTES:
                break
            room = MAX_HEAD_BYTES - used
            if in_head:
                self._head_bytes = MAX_HEAD_BYTES  # _head_complete resets it
            else:
                self._framing_bytes = MAX_HEAD_BYTES  # _body_arrived resets it
            super().data_received(data[:room])
            if self.transport.is_closing() or self.transport.get_protocol() is not self:
                return  # answered, or upgraded (uvicorn passes nothing more on either)
            if in_head and self._in_head and self._head_bytes == MAX_HEAD_BYTES:
                self._refuse()  # no head ended within the bound
                return
            if not in_head and not self._in_head and self._framing_bytes == MAX_HEAD_BYTES:
                self._refuse_framing()  # no body byte came within the bound, nor the end
                return
            data = data[room:]
        if self._in_head:
            self._head_bytes += len(data)
        else:
            self._framing_bytes += len(data)
        super().data_received(data)
        if not self._in_head and self._body_clock is None and self._gate is not None:
            self._start_body_clock()  # a head ended in this read, its body did not

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_head:
            super().on_header(name, value)
        # else a trailer field (after a chunked body's last chunk). uvicorn appended it to the
        # request's headers (scope["headers"]), after the application had them; RFC 9110 6.5.1
        # lets a recipient discard trailers, and none of ember's routes reads them.

    def on_headers_complete(self) -> None:
        self._head_complete()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_arrived(len(body))
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._message_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # uvicorn builds its cycles itself (on_headers_complete) and has no hook for the class:
        # every cycle this protocol runs becomes a ServerCycle (the same object, its send
        # extended): the handler's status text, and HTTP/1.0 streams unchunked (cycle.py).
        if type(cycle) is RequestResponseCycle:
            cycle.__class__ = ServerCycle
        if cycle.waiting_for_100_continue and isinstance(self.flow, HeldFlow):
            # Its client waits for "100 Continue" (the cycle writes it when the application
            # first asks for the body): not the client's time until then. Held from the start,
            # not from the head, as a queued request's clock starts only now.
            self.flow.await_continue()
        if self._body_clock is not None and cycle is self.cycle:
            self._body_clock.restart(self.loop.time())  # a queued request starts: from now
        super()._start_asgi_task(cycle, app)

    def _head_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._framing_bytes = 0
        self._head_read_body = 0
        self._cancel_head_timer()

    def _body_arrived(self, size: int) -> None:
        self._framing_bytes = 0  # the bound counts what is not body since the last body byte
        self._head_read_body += size  # (read only by _start_body_clock, after the head's read)

    def _message_complete(self) -> None:
        self._in_head = True  # a pipelined request may follow on this connection
        if self._body_clock is not None:
            self._end_body()

    def _refuse(self) -> None:
        self._count(431, "head_size", "head over 128 KiB")
        self._answer_and_close(431, "Request Header Fields Too Large", _MESSAGE)

    def _refuse_framing(self) -> None:
        self._count(431, "trailer_size", "trailers or chunk framing over 128 KiB")
        message = (
            f"Request Header Fields Too Large: the chunked body's trailers (or its framing "
            f"between two body bytes) exceed {MAX_HEAD_BYTES // 1024} KiB\n"
        ).encode("ascii")
        self._answer_mid_body(431, "Request Header Fields Too Large", message)

    def _count(self, status: int, reason: str, said: str) -> None:
        if self._gate is not None:
            self._gate.refused_request(status, reason, said)

    def _address(self) -> str | None:
        return self.client[0] if self.client else None

    def _arm_head_timer(self) -> None:
        if self._gate is None or self.transport is None or self.transport.is_closing():
            return
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(
            self._gate.limits.head_timeout_s, self._head_timed_out
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head behind a response still being written: the connection is in
            # use; its head gets another period rather than cutting the response short.
            self._arm_head_timer()
            return
        if self._head_bytes == 0:
            self.transport.close()  # nothing of a request came: an idle connection
            return
        assert self._gate is not None  # invariant: the timer runs only with a gate
        limits = self._gate.limits
        message = (
            f"Request Timeout: the request line and headers did not arrive within "
            f"{limits.head_timeout_s:g} s ({limits.names.head_timeout})\n"
        ).encode("ascii")
        self._count(408, "head_timeout", "head timeout")
        self._answer_and_close(408, "Request Timeout", message)

    def _start_body_clock(self) -> None:
        transport = self.transport
        if transport.is_closing() or transport.get_protocol() is not self:
            return  # answered (a bad request), or upgraded
        assert self._gate is not None  # invariant: called only with a gate
        self._body_clock = BodyClock(self._gate.limits, self.flow, self.loop.time())
        # What of the body came in the head's own read earns its time as later reads do.
        self._body_clock.received = self._head_read_body
        self._body_timer = self.loop.call_later(
            self._gate.limits.body_timeout_s, self._body_deadline
        )

    def _end_body(self) -> None:
        self._body_clock = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_deadline(self) -> None:
        self._body_timer = None
        clock = self._body_clock
        if clock is None or self.transport.is_closing():
            return
        assert self._gate is not None  # invariant: the clock runs only with a gate
        left = clock.left(self.loop.time())
        if self.pipeline:  # its request waits behind a running one: timed once it starts
            left = max(left, self._gate.limits.body_timeout_s)
        if left > 0:  # bytes came, or the server held the body back: the deadline moved
            self._body_timer = self.loop.call_later(left, self._body_deadline)
            return
        self._body_clock = None
        self._count(408, "body_timeout", "body timeout")
        self._answer_mid_body(408, "Request Timeout", timeout_message(self._gate.limits))

    def _answer_mid_body(self, status: int, reason: str, body: bytes) -> None:
        """Refuse the request whose body is being read, and close."""
        cycle = self.cycle
        if not isinstance(cycle, RequestResponseCycle) or cycle.response_started or self.pipeline:
            # Answered already (without reading the body): an answer now would be read as the
            # answer to the client's next request; or queued behind a running request, whose
            # answer it would cut into. Only the connection ends.
            self.transport.close()
            return
        # The application sees the client gone (its half body is never a request), and what
        # it still sends goes nowhere (uvicorn's send drops it once disconnected).
        cycle.disconnected = True
        cycle.message_event.set()
        self._write_answer(status, reason, body)
        self.transport.close()

    def _answer_and_close(self, status: int, reason: str, body: bytes) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self._write_answer(status, reason, body)
        self.transport.close()

    def _write_answer(self, status: int, reason: str, body: bytes) -> None:
        head = [f"HTTP/1.1 {status} {reason}\r\n".encode("ascii")]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(head))


def model_server_protocol(
    limits: ConnectionLimits, say: Callable[[str], None]
) -> Callable[..., BoundedHeadProtocol]:
    """The protocol for ``ember models serve`` (uvicorn's ``http``): the runtime's head bound,
    head deadline and body deadline, no connection caps (``UncappedGate``), its refusals said
    through ``say``. Built before uvicorn's loop exists: the log finds the loop when it speaks."""

    def call_later(delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(delay, callback)

    gate = UncappedGate(limits, RateLimitedLog(say, call_later))
    return functools.partial(BoundedHeadProtocol, gate=gate)


def _text(refusal: Refusal) -> bytes:
    return f"{refusal.reason}: {refusal.message}\n".encode()
