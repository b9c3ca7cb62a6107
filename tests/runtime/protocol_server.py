"""A real uvicorn server with ember's HTTP protocol (``httphead.BoundedHeadProtocol``) on a free
loopback port, serving an ASGI app: what the protocol-level tests talk to with raw sockets."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import ASGIApp

from ember.runtime.connguard import ConnectionGate, ConnectionLimits
from ember.runtime.httphead import BoundedHeadProtocol


@asynccontextmanager
async def protocol_server(app: ASGIApp, limits: ConnectionLimits) -> AsyncIterator[int]:
    """Serve ``app`` under ``limits``; yields the port."""
    gate = ConnectionGate(limits)
    http = functools.partial(BoundedHeadProtocol, gate=gate)
    config = uvicorn.Config(app, http=http, lifespan="off", log_level="error")  # type: ignore[arg-type]
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[listener]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await task
