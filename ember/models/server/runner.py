"""Run the model server under uvicorn (what ``ember models serve`` calls).

The socket is bound first (``--port 0`` picks a free port, and the line printed names the real
one), then uvicorn serves while the model loads in the background; a model that fails to load
stops the server with exit status 1.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any, TextIO

import uvicorn

from ember import heap
from ember.errors import UserError
from ember.listen import AddressInUse, bind
from ember.models.server.app import build_app
from ember.models.server.settings import ServerSettings
from ember.models.server.state import ServerState


def run_server(
    settings: ServerSettings,
    *,
    log: TextIO | None = None,
    http: Callable[..., Any] | None = None,
) -> int:
    """Serve until interrupted; returns the process exit status. ``http``: uvicorn's HTTP
    protocol (the CLI passes the runtime's, with its head bound and deadlines: the models layer
    does not import the runtime); uvicorn's own when None."""
    out = log if log is not None else sys.stderr
    # Per-request objects die young; the model and its tokenizer live as long as the process
    # (ember/heap.py): frozen before the first request, so no collection walks them.
    heap.tune_for_serving()
    sock = _listen(settings.host, settings.port)  # first: a taken port costs no model load
    state = ServerState(settings, log=out, on_ready=heap.freeze_long_lived)
    config = uvicorn.Config(
        build_app(state),
        host=settings.host,
        port=settings.port,
        # uvicorn's own info lines would interleave with ours; its warnings and errors stay.
        log_level=settings.log_level if settings.log_level in ("error", "critical") else "warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        **({"http": http} if http is not None else {}),
    )
    server = uvicorn.Server(config)

    def stop(_error: BaseException) -> None:
        server.should_exit = True

    state.on_load_failure = stop
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    state.progress(
        f"listening on http://{shown}:{port} (/health answers 503 until the model is ready)"
    )
    server.run(sockets=[sock])
    return 1 if state.load_error is not None else 0


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the model loads (``ember.listen``); a taken
    port is one line saying which and what to do (uvicorn's own bind prints only
    ``[Errno 98] ...``), in SGLang's terms (``--port 0`` picks a free one)."""
    try:
        return bind(host, port)
    except AddressInUse:
        raise UserError(
            f"port {port} on {host} is already in use: stop the server listening there, "
            "pick another --port, or pass --port 0 for a free one"
        ) from None
