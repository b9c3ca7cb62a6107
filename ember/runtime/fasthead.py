"""Response heads as uvicorn writes them, encoded once per distinct head (``fasthttp.py``).

``encode_head`` produces uvicorn's bytes for a status (with the handler's status text, as
``statusline.StatusTextCycle`` writes it) and the worker's headers, or None for a head uvicorn
treats specially; ``HeadCache`` keeps the encodings a server's connections reuse.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE

from ember.runtime.statusline import status_line as encode_status_line

HeadKey = tuple[int, tuple[tuple[str, str], ...], str]  # status, headers, status text
# The status line, the worker's headers, and whether they have a date of their own.
EncodedHead = tuple[bytes, bytes, bool]

# Response headers that change how uvicorn frames the response: left to uvicorn's own writer.
FRAMING = frozenset({b"content-length", b"transfer-encoding", b"connection"})


class HeadCache:
    """Encoded response heads, shared by a server's connections.

    A worker answers most requests with the same few status-and-headers combinations, and
    encoding and checking each header costs more than the rest of the write.
    """

    LIMIT = 256  # distinct heads kept; past it, start over (a worker with unique headers)

    def __init__(self) -> None:
        self._encoded: dict[HeadKey, Any] = {}
        self._defaults_of: object = None
        self._defaults = b""
        self._defaults_dateless = b""

    def get(self, key: HeadKey) -> EncodedHead | None:
        return self._encoded.get(key)

    def put(self, key: HeadKey, encoded: EncodedHead | None) -> EncodedHead | None:
        if len(self._encoded) >= self.LIMIT:
            self._encoded.clear()
        if encoded is not None:
            self._encoded[key] = encoded
        return encoded

    def defaults(self, headers: list[tuple[bytes, bytes]], own_date: bool = False) -> bytes:
        """uvicorn's default headers (its date), re-encoded when it replaces the list; without
        the date when the worker's response has one (``cycle.py`` does the same on uvicorn's
        path), so a proxied response carries one date: the upstream's."""
        if headers is not self._defaults_of:
            self._defaults_of = headers
            self._defaults = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
            self._defaults_dateless = b"".join(
                name + b": " + value + b"\r\n" for name, value in headers if name != b"date"
            )
        return self._defaults_dateless if own_date else self._defaults


def encode_head(
    status: int, headers: list[tuple[str, str]], status_text: str = ""
) -> EncodedHead | None:
    """The status line and the worker's headers as uvicorn writes them, and whether they have
    a ``date``; None: leave it to uvicorn."""
    status_line = encode_status_line(status, status_text)
    if status_line is None:
        return None
    content = []
    own_date = False
    for name, value in headers:
        raw_name = name.encode("latin-1", "replace").lower()
        raw_value = value.encode("latin-1", "replace")
        if raw_name in FRAMING or HEADER_RE.search(raw_name) or HEADER_VALUE_RE.search(raw_value):
            return None
        own_date = own_date or raw_name == b"date"
        content += [raw_name, b": ", raw_value, b"\r\n"]
    return status_line, b"".join(content), own_date
