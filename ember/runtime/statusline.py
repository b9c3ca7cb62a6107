"""The handler's own status text (reason phrase) on the wire, on uvicorn's path and the fast one.

Workers sends a Response's ``statusText`` as the reason phrase (UTF-8, as workerd writes it);
uvicorn's ``RequestResponseCycle`` always writes its standard phrase (``STATUS_LINE``) and ASGI
has no field for another. The router puts the handler's text in ``http.response.start`` under
``STATUS_TEXT`` (only when there is one: the usual message stays as it was), and
``StatusTextCycle`` writes that head through a transport that swaps uvicorn's status line for
the handler's. The fast path (``fasthead.py``) writes its heads itself with ``status_line``.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle

STATUS_TEXT = "ember.status_text"  # the start message's key for the handler's text


def status_line(status: int, text: str) -> bytes | None:
    """The status line for ``status`` with ``text`` ("": uvicorn's own line); None if unknown.

    ``text`` was checked (``fields.status_text``): no CR, LF or other control character.
    """
    if not text:
        return STATUS_LINE.get(status)
    return b"HTTP/1.1 %d %s\r\n" % (status, text.encode("utf-8"))


class StatusTextCycle(RequestResponseCycle):
    """uvicorn's cycle, writing the start message's ``STATUS_TEXT`` as the reason phrase."""

    async def send(self, message: Any) -> None:
        text = message.get(STATUS_TEXT) if message["type"] == "http.response.start" else None
        if not text or self.response_started:
            await super().send(message)
            return
        custom = status_line(message["status"], text)
        standard = STATUS_LINE.get(message["status"])
        if custom is None or standard is None:
            await super().send(message)  # uvicorn refuses the status itself
            return
        transport = self.transport
        self.transport = _StatusLineWriter(transport, standard, custom)  # type: ignore[assignment]
        try:
            await super().send(message)  # the head is its one write
        finally:
            self.transport = transport


class _StatusLineWriter:
    """The connection's transport, writing ``custom`` where a write starts with ``standard``."""

    def __init__(self, transport: Any, standard: bytes, custom: bytes) -> None:
        self._transport = transport
        self._standard = standard
        self._custom = custom

    def write(self, data: bytes) -> None:
        if data.startswith(self._standard):
            data = self._custom + data[len(self._standard) :]
            self._standard = b"\0"  # once: the head is the first write
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
