"""Serve a ``Platform`` with uvicorn on one port (what ``ember serve`` runs).

Prints the banner once listening: the address, the state directory, the live deployments with
their URLs. ``port_file`` (tests, benchmarks) receives the bound port once the server listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ember.runtime.http import ResponseAborted
from ember.runtime.listen import bind
from ember.runtime.platform.app import Platform
from ember.runtime.platform.websocket import TolerantWebSocketProtocol


async def serve(
    platform: Platform,
    host: str,
    port: int,
    *,
    port_file: Path | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until uvicorn is told to stop (SIGINT/SIGTERM), then shut the platform down."""
    import uvicorn

    from ember.runtime.httphead import BoundedHeadProtocol

    config = uvicorn.Config(
        platform,
        host=host,
        port=port,
        lifespan="on",
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing in front of it whose headers to trust
        http=BoundedHeadProtocol,  # 431 past 128 KiB of request head (runtime/httphead.py)
        server_header=False,
        ws=TolerantWebSocketProtocol,
    )
    logging.getLogger("uvicorn.error").addFilter(_drop_aborted_responses)
    listener = bind(host, port)  # first: a taken port fails before the platform starts
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    try:
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            bound_host, bound_port = listener.getsockname()[:2]
            shown = "127.0.0.1" if bound_host in ("0.0.0.0", "::") else bound_host
            platform.origin = f"http://{shown}:{bound_port}"
            if on_ready is not None:
                on_ready(platform.origin)
            if port_file is not None:  # last: whoever waits for it also finds the banner
                staging = port_file.with_suffix(".tmp")
                staging.write_text(str(bound_port))
                os.replace(staging, port_file)
        await serving
    finally:
        if not serving.done():
            server.should_exit = True
            with contextlib.suppress(BaseException):
                await serving
        listener.close()


def _drop_aborted_responses(record: logging.LogRecord) -> bool:
    # A streamed response cut short on purpose (limit, worker failure) is not a server error.
    return not (record.exc_info and isinstance(record.exc_info[1], ResponseAborted))
