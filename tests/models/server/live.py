"""A real model server for tests: uvicorn on 127.0.0.1, an ephemeral port, real tiny weights;
in this process (``running_server``) or as an ``ember models serve`` subprocess
(``serve_process``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from ember.models.server.app import build_app
from ember.models.server.settings import ServerSettings
from ember.models.server.state import ServerState


@dataclass
class LiveServer:
    url: str
    state: ServerState

    @property
    def engine_stats(self):  # noqa: ANN201 - engine.llm_engine.EngineStats
        assert self.state.served is not None
        return self.state.served.llm.stats


def server_settings(model: str, **overrides: object) -> ServerSettings:
    """Small and fast: one torch thread (the test machine is shared), a small KV pool."""
    values: dict[str, object] = dict(
        model=model,
        port=0,
        torch_threads=1,
        kv_cache_bytes=8 * 2**20,
        max_running_requests=8,
        chunked_prefill_size=256,
    )
    values.update(overrides)
    return ServerSettings(**values)  # type: ignore[arg-type]


@contextlib.contextmanager
def running_server(
    settings: ServerSettings, *, load: bool = True, wait: bool = True, log: Any = None
) -> Iterator[LiveServer]:
    """Serve ``settings`` in a background thread; with ``wait``, until /health answers 200.
    ``log``: where the server's log lines go (a text stream; discarded by default)."""
    state = ServerState(settings, log=log if log is not None else _Discard())
    app = build_app(state, load=load)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: server.started, "uvicorn to start")
        if load and wait:
            _wait_for(lambda: _health(url) == 200 or state.load_error is not None, "the model")
            if state.load_error is not None:
                raise state.load_error
        yield LiveServer(url, state)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


async def post_as_uvicorn(app: Any, path: str, payload: bytes, *, keep: bool = True) -> list[dict]:
    """Call the ASGI ``app`` with a JSON POST as uvicorn does once the body has arrived: ASGI
    spec 2.3, and ``receive()`` returns the body without suspending (httpx's ASGITransport
    suspends there), then waits (the client stays connected). The messages the app sent, unless
    ``keep`` is False."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    sent: list[dict] = []
    unread = [{"type": "http.request", "body": payload, "more_body": False}]

    async def receive() -> dict:
        if unread:
            return unread.pop()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        if keep:
            sent.append(message)

    await app(scope, receive, send)
    return sent


def _health(url: str) -> int:
    try:
        return httpx.get(url + "/health", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def _wait_for(condition, what: str, timeout: float = 120.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_until(condition, what: str, timeout: float = 60.0) -> None:  # noqa: ANN001
    _wait_for(condition, what, timeout)


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def bad_request(response: httpx.Response) -> dict:
    """The OpenAI-style ``error`` object of a 400 answer (fails the test on any other status)."""
    assert response.status_code == 400, response.text
    return response.json()["error"]


def free_port() -> int:
    """A loopback port nobody listens on now (the OS picks it; never 8787)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_process(model: str, *args: str, timeout: float = 180.0) -> Iterator[str]:
    """``ember models serve MODEL ARGS`` as a real subprocess on a free loopback port; yields
    its URL once ``/health`` answers 200, and stops the process (by its own pid) after."""
    port = free_port()
    repo = Path(__file__).resolve().parents[3]
    process = subprocess.Popen(
        [sys.executable, "-m", "ember", "models", "serve", model, "--port", str(port), *args],
        cwd=repo,
        env=dict(os.environ, PYTHONPATH=str(repo)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _health(url) == 200 or process.poll() is not None, "serve", timeout)
        if process.poll() is not None:
            raise RuntimeError(f"ember models serve exited with {process.returncode}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
