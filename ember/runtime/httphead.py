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
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ember.runtime.cycle import ServerCycle

MAX_HEAD_BYTES = 128 * 1024
_MESSAGE = (
    f"Request Header Fields Too Large: the request line and headers exceed "
    f"{MAX_HEAD_BYTES // 1024} KiB\n"
).encode("ascii")


class BoundedHeadProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` answering ``431`` to a request head over ``MAX_HEAD_BYTES``.

    A subclass that overrides ``on_headers_complete`` or ``on_message_complete`` without
    calling them here (``ember dev``'s fast path) calls ``_head_complete`` and
    ``_message_complete`` itself.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._in_head = True  # a request's head is being read (or the next one may start)
        self._head_bytes = 0  # bytes read since then

    def data_received(self, data: bytes) -> None:
        # A read that would take the head past the bound is parsed only up to it: a head that
        # has not ended there is refused, even if its end came in the same read (asyncio hands
        # over up to 256 KiB at once); what follows an ended head is parsed as usual.
        while self._in_head and self._head_bytes + len(data) > MAX_HEAD_BYTES:
            room = MAX_HEAD_BYTES - self._head_bytes
            self._head_bytes = MAX_HEAD_BYTES
            super().data_received(data[:room])
            if self._head_bytes == MAX_HEAD_BYTES:  # no head ended within the bound
                if self._in_head and not self.transport.is_closing():
                    self._refuse()
                return
            if self.transport.is_closing() or self.transport.get_protocol() is not self:
                return  # answered, or upgraded (uvicorn passes nothing more on either)
            data = data[room:]
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._head_complete()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._message_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # uvicorn builds its cycles itself (on_headers_complete) and has no hook for the class:
        # every cycle this protocol runs becomes a ServerCycle (the same object, its send
        # extended): the handler's status text, and HTTP/1.0 streams unchunked (cycle.py).
        if type(cycle) is RequestResponseCycle:
            cycle.__class__ = ServerCycle
        super()._start_asgi_task(cycle, app)

    def _head_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0

    def _message_complete(self) -> None:
        self._in_head = True  # a pipelined request may follow on this connection

    def _refuse(self) -> None:
        head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: " + str(len(_MESSAGE)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            _MESSAGE,
        ]
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(b"".join(head))
        self.transport.close()
