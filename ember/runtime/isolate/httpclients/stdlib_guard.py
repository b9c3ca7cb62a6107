"""``http.client`` (and so ``urllib.request``) in an isolate: a clear error instead of a socket.

Cloudflare's Python Workers support the HTTP clients built on fetch (``requests``, ``urllib3``,
``httpx``, ``aiohttp``) but not the standard library's raw-socket clients; ember matches that
list. Without this guard, ``urlopen`` under ``ember dev`` would quietly open a socket past
the subrequest limit and the network policy (code that works locally, then fails deployed), and
a sandboxed isolate (no INET sockets) would fail with a bare ``PermissionError``. It is a clear
message, not a boundary: in ``ember dev`` a worker can still open a socket itself; only
``ember serve``'s sandbox takes sockets away. ``urlopen`` wraps the ``OSError`` raised here in
``urllib.error.URLError``, so code that catches either still works, and the message names what
to use instead.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

_MARK = "_ember_guarded"
MESSAGE = (
    "urllib.request and http.client open sockets, which a worker cannot do (as on Cloudflare's "
    "Python Workers): use requests, urllib3 or httpx.Client, or await fetch() or "
    "httpx.AsyncClient"
)


class SocketsUnavailable(ConnectionRefusedError):
    """Raised by ``http.client.HTTPConnection.connect`` inside an isolate."""


def patch(client: ModuleType) -> None:
    """Make ``client.HTTPConnection.connect`` (HTTPS's calls it) raise ``SocketsUnavailable``."""
    connection = client.HTTPConnection
    if getattr(connection, _MARK, False):
        return
    connection.connect = _connect
    setattr(connection, _MARK, True)


def _connect(self: Any) -> None:
    raise SocketsUnavailable(MESSAGE)
