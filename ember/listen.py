"""The listening socket of ``ember dev``, ``ember serve`` and ``ember models serve``, bound
before anything starts.

uvicorn binds only after the app's startup (the supervisor, its zygote, the first isolate) and
answers a port that is taken with its own traceback and exit code 3. Binding first turns that
into one line, worded as wrangler words it, before any process was started for nothing.
"""

from __future__ import annotations

import errno
import socket

from ember.errors import UserError

BACKLOG = 2048  # uvicorn's default


class AddressInUse(UserError):
    """Another process listens on the address (``EADDRINUSE``)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise UserError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"Address already in use ({shown}). Please check that you are not already "
                "running a server on this address or specify a different port with --port."
            ) from None
        raise UserError(f"cannot listen on {shown}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock
