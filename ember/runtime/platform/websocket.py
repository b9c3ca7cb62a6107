"""uvicorn's WebSocket protocol, tolerant of unmasked frames from clients (``wrangler tail``).

RFC 6455 makes clients mask every frame and servers fail the connection otherwise. wrangler
4.164 sends its first tail frame (``{"debug": false}``) with ``mask: false``
(``src/tail/createTail.ts``), and Cloudflare's tail servers accept it; a strict server closes the
connection at once and wrangler loops on "Tail connection lost. Reconnecting". Masking protects
intermediaries that might mistake frame bytes for HTTP (cache poisoning through browsers); on a
connection straight to ember it buys nothing, so unmasked client frames are accepted here and
everything else about the protocol stays as the websockets library implements it.

How: the library parses a frame with generator-based reads in a fixed order (2-byte header,
optional 2- or 8-byte length, 4-byte mask, payload). ``_UnmaskedFrameReader`` follows that order;
when a header says "unmasked" it sets the mask bit and answers the mask read with four zero
bytes (an all-zero mask leaves the payload as it is) without consuming input.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

_MASK_BIT = 0x80
_EXTENDED = {126: "ext", 127: "ext"}


class _UnmaskedFrameReader(StreamReader):
    """A StreamReader that turns an unmasked client frame into one masked with zeros."""

    def __init__(self) -> None:
        super().__init__()
        self._step = "header"
        self._zero_mask = False

    def read_exact(self, n: int) -> Generator[None, None, bytearray]:
        step = self._step
        if step == "mask" and self._zero_mask:
            self._zero_mask = False
            self._step = "payload"
            return bytearray(4)
        data = yield from super().read_exact(n)
        if step == "header":
            if not data[1] & _MASK_BIT:
                data[1] |= _MASK_BIT
                self._zero_mask = True
            self._step = _EXTENDED.get(data[1] & 0x7F, "mask")
        elif step == "ext":
            self._step = "mask"
        elif step == "mask":
            self._step = "payload"
        else:
            self._step = "header"
        return data


class _TolerantServerProtocol(ServerProtocol):
    """websockets' server protocol reading frames through ``_UnmaskedFrameReader``."""

    @property  # type: ignore[override]
    def reader(self) -> StreamReader:
        return self._tolerant_reader

    @reader.setter
    def reader(self, value: StreamReader) -> None:
        # Protocol.__init__ assigns its reader once, before any data arrives: use ours instead.
        self._tolerant_reader = _UnmaskedFrameReader()


class TolerantWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O websockets protocol with the tolerant server protocol inside."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        original = self.conn
        self.conn = _TolerantServerProtocol(
            extensions=original.available_extensions,
            max_size=self.config.ws_max_size,
            logger=original.logger,
        )
