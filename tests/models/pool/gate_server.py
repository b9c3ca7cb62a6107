"""A protocol-level test double of a replica, for admission tests that need control of time.

It speaks the pool's backend protocol (``/health``, ``/v1/models``, ``/v1/chat/completions`` as
JSON or SSE) and holds every chat request until the test opens the gate, so a test can keep N
requests in flight and look at where the pool sent them. It stands at the HTTP seam between the
pool and any backend (the seam SGLang also plugs into); the pool's behaviour against real ember
model servers is tested in ``test_pool_live.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class GateServer:
    """One double: ``held`` requests in flight, ``seen`` bodies, ``healthy`` and
    ``generating`` switches."""

    name: str
    url: str = ""
    healthy: bool = True
    # SGLang's /health_generate: 503 when its scheduler sent nothing (stalled), /health aside.
    generating: bool = True
    held: int = 0
    seen: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop | None = None
    gate: asyncio.Event | None = None
    opened: bool = False
    also_lists: list[str] = field(default_factory=list)  # more ids /v1/models names, after it

    def open(self) -> None:
        """Let every held request (and every later one) finish."""
        self.opened = True
        if self.loop is not None and self.gate is not None:
            self.loop.call_soon_threadsafe(self.gate.set)

    def app(self) -> Starlette:
        async def health(request: Request) -> Response:
            return Response(status_code=200 if self.healthy else 503)

        async def health_generate(request: Request) -> Response:
            return Response(status_code=200 if self.healthy and self.generating else 503)

        async def models(request: Request) -> Response:
            ids = [self.name, *self.also_lists]
            return JSONResponse({"object": "list", "data": [{"id": i} for i in ids]})

        async def chat(request: Request) -> Response:
            if self.gate is None:
                self.loop, self.gate = asyncio.get_running_loop(), asyncio.Event()
                if self.opened:
                    self.gate.set()
            body = await request.json()
            self.seen.append(body)
            self.headers.append(dict(request.headers))
            self.held += 1
            chunk = {
                "object": "chat.completion.chunk",
                "model": self.name,
                "choices": [{"index": 0, "delta": {"content": self.name}, "finish_reason": None}],
            }
            if body.get("stream"):

                async def events():  # noqa: ANN202
                    try:
                        yield f"data: {json.dumps(chunk)}\n\n"
                        await self.gate.wait()
                        yield "data: [DONE]\n\n"
                    finally:
                        self.held -= 1

                return StreamingResponse(events(), media_type="text/event-stream")
            try:
                await self.gate.wait()
            finally:
                self.held -= 1
            return JSONResponse(
                {
                    "object": "chat.completion",
                    "model": self.name,
                    "choices": [{"index": 0, "message": {"content": self.name}}],
                }
            )

        return Starlette(
            routes=[
                Route("/health", health),
                Route("/health_generate", health_generate),
                Route("/v1/models", models),
                Route("/v1/chat/completions", chat, methods=["POST"]),
            ]
        )


@contextlib.contextmanager
def gate_servers(*names: str) -> Iterator[list[GateServer]]:
    """Run one GateServer per name on 127.0.0.1 ephemeral ports."""
    running = []
    try:
        for name in names:
            double = GateServer(name)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            double.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            server = uvicorn.Server(
                uvicorn.Config(double.app(), log_level="error", lifespan="off", ws="none")
            )
            thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
            thread.start()
            running.append((double, server, thread, sock))
            deadline = time.monotonic() + 10
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.01)
        yield [double for double, *_ in running]
    finally:
        for double, server, thread, sock in running:
            if double.gate is not None:
                double.open()
            server.should_exit = True
            thread.join(10)
            sock.close()
