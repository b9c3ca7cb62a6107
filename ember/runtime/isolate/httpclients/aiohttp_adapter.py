"""``aiohttp`` in an isolate: each request an awaited subrequest, behind aiohttp's own parser.

The seam is ``TCPConnector._create_connection``: instead of a socket, the connection's protocol
(aiohttp's ``ResponseHandler``) gets a ``FetchTransport``. It reads the HTTP/1.1 request aiohttp
writes (parsed with h11, httpx's HTTP/1.1 library), makes it a subrequest
(``outbound.fetch_async``: counted, policy-checked) and writes the answer back as HTTP/1.1
bytes, chunk by chunk as they arrive, honouring aiohttp's ``pause_reading``. Everything above
(sessions, redirects, cookies, timeouts, decompression, streamed reads) stays aiohttp's own; every
answer says ``connection: close``, so a connection is never reused.

A failed subrequest (policy, DNS, connection, the subrequest limit) is aiohttp's
``ClientConnectorError``, which aiohttp does not retry; aiohttp's own timeouts close the
transport, which cancels the subrequest.
"""

from __future__ import annotations

import asyncio
from errno import ECONNREFUSED
from types import ModuleType
from typing import Any

import h11

from ember.runtime.isolate.outbound import Outbound, SubrequestFailed, fetch_async
from ember.runtime.mux import InStream, StreamAborted

_MARK = "_ember_subrequests"
_NOT_FORWARDED = {b"connection", b"transfer-encoding", b"content-length", b"keep-alive"}


def patch(connector: ModuleType) -> None:
    """Route ``connector.TCPConnector``'s connections through fetch."""
    tcp = connector.TCPConnector
    if getattr(tcp, _MARK, False):
        return
    tcp._create_connection = _create_connection
    setattr(tcp, _MARK, True)


async def _create_connection(self: Any, req: Any, traces: Any, timeout: Any) -> Any:
    protocol = self._factory()
    protocol.connection_made(FetchTransport(protocol, req))
    return protocol


class FetchTransport(asyncio.Transport):
    """One request and its answer, in memory (see the module docstring)."""

    def __init__(self, protocol: Any, req: Any) -> None:
        super().__init__()
        self._protocol = protocol
        self._req = req
        self._origin = str(req.url.origin())
        self._parser = h11.Connection(h11.SERVER)
        self._head: h11.Request | None = None
        self._body: list[bytes] = []
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._reading = asyncio.Event()
        self._reading.set()
        port = req.url.port or (443 if req.url.scheme == "https" else 80)
        self._extra = {"peername": (req.url.host, port), "sockname": None, "socket": None}

    # -- what aiohttp writes: the request -----------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or self._task is not None:
            return
        self._parser.receive_data(bytes(data))
        while True:
            event = self._parser.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._head = event
            elif isinstance(event, h11.Data):
                self._body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._task = asyncio.ensure_future(self._exchange())
                return

    def writelines(self, chunks: Any) -> None:
        self.write(b"".join(chunks))

    # -- the subrequest and what aiohttp reads ------------------------------------------------

    async def _exchange(self) -> None:
        try:
            await self._answer()
        except Exception as exc:  # noqa: BLE001 - aiohttp's reader must hear of any failure
            self._protocol.connection_lost(ConnectionResetError(f"{type(exc).__name__}: {exc}"))

    async def _answer(self) -> None:
        head = self._head
        assert head is not None  # invariant: EndOfMessage comes after a Request
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in head.headers
            if name.lower() not in _NOT_FORWARDED
        ]
        body = b"".join(self._body) or None
        request = Outbound(head.method.decode(), self._origin + head.target.decode(), headers, body)
        try:
            answer, stream = await fetch_async(request)
        except SubrequestFailed as exc:
            self._protocol.set_exception(_connector_error(self._req, exc))
            return
        reply = [(name, value) for name, value in answer.headers if name.lower() != "connection"]
        response = h11.Response(
            status_code=answer.status,
            headers=[*reply, ("connection", "close")],
            reason=answer.reason.encode("latin-1", "replace"),
        )
        self._deliver(self._parser.send(response))
        try:
            if stream is not None:
                await self._relay(stream)
        except StreamAborted as exc:
            self._protocol.connection_lost(ConnectionResetError(f"Network connection lost: {exc}"))
            return
        self._deliver(self._parser.send(h11.EndOfMessage()))

    async def _relay(self, stream: InStream) -> None:
        try:
            async for chunk in stream:
                await self._reading.wait()
                self._deliver(self._parser.send(h11.Data(data=chunk)))
        finally:
            await stream.aclose()

    def _deliver(self, data: bytes | None) -> None:
        if data and not self._closing:
            self._protocol.data_received(data)

    # -- the rest of the transport interface --------------------------------------------------

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._task is not None and not self._task.done():
            self._task.cancel()  # cancels the subrequest (a CancelCall to the supervisor)
        asyncio.get_running_loop().call_soon(self._protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return (0, 0)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def can_write_eof(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)


def _connector_error(req: Any, exc: SubrequestFailed) -> Exception:
    from aiohttp import ClientConnectorError

    return ClientConnectorError(req.connection_key, ConnectionRefusedError(ECONNREFUSED, str(exc)))
