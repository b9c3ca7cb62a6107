"""The request-response cycle ember's HTTP protocol runs (``httphead.py`` swaps it in).

uvicorn's ``RequestResponseCycle`` plus two things it does not do as Workers does:

- the handler's status text as the reason phrase (``statusline.StatusTextCycle``);
- a body of unknown length to an HTTP/1.0 client. uvicorn frames every response without a
  ``content-length`` with ``transfer-encoding: chunked``, which HTTP/1.0 does not have: such
  a client read the chunk-size lines as part of the body. Here that body is written as it is
  and ends when the connection closes (RFC 9112 6.3), which uvicorn already announces
  (``connection: close``: it keeps no HTTP/1.0 connection alive).

It also tells the body deadline's ``HeldFlow`` when a wait for ``100 Continue`` ends, and
writes uvicorn's ``date`` only for a response without one: a worker's response passed through
from an upstream keeps the upstream's date alone (uvicorn wrote its own in front: two dates).
"""

from __future__ import annotations

from typing import Any

from ember.runtime.bodyclock import HeldFlow
from ember.runtime.statusline import StatusTextCycle

_FRAMING = (b"content-length", b"transfer-encoding")


class ServerCycle(StatusTextCycle):
    """See the module docstring."""

    _until_close = False  # this response's body is unframed: written raw, then the close

    async def receive(self) -> Any:
        if self.waiting_for_100_continue:
            self._continued()  # uvicorn's receive writes "100 Continue" now
        return await super().receive()

    async def send(self, message: Any) -> None:
        kind = message["type"]
        if kind == "http.response.start" and self.waiting_for_100_continue:
            self._continued()  # the final answer ends the client's wait as well
        if kind == "http.response.start" and not self.response_started:
            if self._unframed(message):
                self._until_close = True
                self.chunked_encoding = False  # uvicorn then adds no transfer-encoding
            if any(name.lower() == b"date" for name, _ in message.get("headers", ())):
                self.default_headers = [h for h in self.default_headers if h[0] != b"date"]
        elif kind == "http.response.body" and self._until_close and not self.response_complete:
            await self._send_raw(message)
            return
        await super().send(message)

    def _continued(self) -> None:
        # The body deadline (bodyclock.py) counts the wait for "100 Continue" as the server's.
        if isinstance(self.flow, HeldFlow):
            self.flow.continued()

    def _unframed(self, message: Any) -> bool:
        if (
            self.scope.get("http_version") != "1.0"
            or self.scope["method"] == "HEAD"
            or message["status"] in (204, 304)
            or self.keep_alive  # (uvicorn never keeps an HTTP/1.0 connection)
        ):
            return False
        return not any(name.lower() in _FRAMING for name, _ in message.get("headers", []))

    async def _send_raw(self, message: Any) -> None:
        # uvicorn's body send, less the framing: flow control, the write, and on the last
        # message the end of the response, which closes the connection.
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        body = message.get("body", b"")
        if body:
            self.transport.write(body)
        if not message.get("more_body", False):
            self.response_complete = True
            self.message_event.set()
            self.transport.close()
            self.on_response()
