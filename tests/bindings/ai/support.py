"""Shared by the AI tests: tiny checkpoints, an event loop in a thread, polling, configs."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest
import uvicorn

from ember.models.server.metrics import parse_prometheus
from tests.runtime.harness import Harness

if TYPE_CHECKING:
    from ember.bindings.ai.gateway import AIGateway

T = TypeVar("T")
GLM = "@cf/zai-org/glm-4.7-flash"
KIMI = "@cf/moonshotai/kimi-k2.5"
ROOT = Path(__file__).resolve().parents[3]
# One torch thread and a small KV pool per replica: the test machine is shared.
SMALL_SERVER = ["--torch-threads", "1", "--kv-cache-bytes", "16MiB"]


def tiny_checkpoints(factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(glm, kimi): the shipped tiny checkpoints once built, random-init stand-ins until then.

    The directory is shared by every AI test module of the session (made once).
    """
    from tests.models.server.checkpoints import checkpoint_dir

    scratch = factory.getbasetemp() / "ai-checkpoints"
    return checkpoint_dir("glm4moe-tiny", scratch), checkpoint_dir("kimi-tiny", scratch)


def models_section(glm: Path, kimi: Path | None = None, **extra: Any) -> dict[str, Any]:
    """An ``ai.models`` mapping serving the GLM (and Kimi) id from the tiny checkpoints."""
    section: dict[str, Any] = {GLM: {"checkpoint": str(glm), "args": SMALL_SERVER, **extra}}
    if kimi is not None:
        section[KIMI] = {"checkpoint": str(kimi), "args": SMALL_SERVER, **extra}
    return section


class LoopThread:
    """An asyncio loop in a daemon thread, for objects that outlive one test (a pool)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` (the test thread sleeps; the servers run elsewhere)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class RestServer:
    """``ai_app`` (the REST and OpenAI-compatible routes) on a 127.0.0.1 port, over the gateway
    ``factory`` makes: called in the server's loop, on the first request, and kept once made
    (as ``ember dev`` keeps its shared gateway). A context manager."""

    def __init__(self, factory: Callable[[], AIGateway]) -> None:
        from ember.bindings.ai.rest import ai_app

        self.factory = factory
        self.gateway: AIGateway | None = None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(ai_app(self._gateway), log_level="error", lifespan="off", ws="none")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def _gateway(self) -> AIGateway:
        if self.gateway is None:
            self.gateway = self.factory()
        return self.gateway

    def __enter__(self) -> RestServer:
        self.thread.start()
        wait_until(lambda: self.server.started, "the REST server", 10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


# A weather question, the tool that answers it and the schema of its arguments (also a JSON
# schema for response_format): the live binding tests ask the tiny models with them.
UNIT = {
    "type": "object",
    "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
    "required": ["unit", "days"],
    "additionalProperties": False,
}
TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Forecast", "parameters": UNIT},
}
HI = [{"role": "user", "content": "What is the weather?"}]


class AI:
    """An ``ember dev`` harness running the live tests' worker, and its AI replicas."""

    def __init__(self, harness: Harness, deployment: str, section: dict) -> None:
        self.harness, self.deployment, self.section = harness, deployment, section

    def client(self) -> httpx.Client:
        return self.harness.client(self.deployment, timeout=120)

    def post(self, model: str, inputs: dict, options: dict | None = None, mode: str = "json"):  # noqa: ANN201
        ask = {"model": model, "inputs": inputs, "options": options, "mode": mode}
        with self.client() as client:
            return client.post("/", json=ask)

    def replica_url(self, model: str) -> str:
        gateway = self.harness.supervisor.resources.shared("ai.gateway", lambda: None)
        return gateway.pool.group(model).replicas[0].url

    def running(self, model: str) -> float:
        text = httpx.get(self.replica_url(model) + "/metrics", timeout=10).text
        return parse_prometheus(text)[f'sglang:num_running_reqs{{model_name="{model}"}}']
