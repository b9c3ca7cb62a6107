"""A real supervisor behind a real uvicorn server on 127.0.0.1, in a background event loop.

Tests write a worker into ``tmp_path``, ``deploy`` it under a unique id, and send HTTP with
``client(id)``; the router picks the deployment from the ``x-test-deployment`` header. One
harness (one zygote) serves a whole test session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import textwrap
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn

from ember.bindings.registry import default_registry
from ember.runtime.deployment import Deployment, load_deployment
from ember.runtime.events import ConsoleEvent, ListSink
from ember.runtime.httphead import BoundedHeadProtocol
from ember.runtime.router import Router
from ember.runtime.supervisor import Supervisor
from tests.runtime import slow_binding

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
HEADER = "x-test-deployment"


class Harness:
    """See the module docstring."""

    def __init__(self, state_dir: Path, *, dev: bool = True, **supervisor_options: Any) -> None:
        self.events = ListSink()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="harness", daemon=True)
        self._thread.start()
        self._ids = itertools.count(1)
        self.registry = default_registry([slow_binding.BINDING_TYPE])
        self.supervisor: Supervisor = self.run(self._start(state_dir, dev, supervisor_options))

    async def _start(self, state_dir: Path, dev: bool, options: dict[str, Any]) -> Supervisor:
        supervisor = Supervisor(
            state_dir=state_dir, events=self.events, registry=self.registry, dev=dev, **options
        )
        await supervisor.start()
        router = Router(
            supervisor,
            lambda scope: _header(scope, HEADER),
            test_scheduled=True,
            trigger_handlers=True,
        )
        config = uvicorn.Config(
            router,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            log_level="error",
            ws="none",
            http=BoundedHeadProtocol,  # as ember serve: it writes the handler's status text
        )
        self._server = uvicorn.Server(config)
        self._serving = asyncio.ensure_future(self._server.serve())
        while not self._server.started:
            await asyncio.sleep(0.005)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return supervisor

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run ``coro`` on the harness loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def deployment(self, root: Path, **changes: Any) -> Deployment:
        """Load ``root`` as a deployment with a unique id; ``limits=`` etc. override fields."""
        base = load_deployment(root, registry=self.registry)
        limit_changes = changes.pop("limits", {})
        limits = dataclasses.replace(base.limits, **limit_changes)
        return dataclasses.replace(
            base, id=f"{base.name}-{next(self._ids)}", limits=limits, **changes
        )

    def deploy(self, root: Path, *, sandbox: Any = None, **changes: Any) -> str:
        """Deploy ``root`` (under sandbox profile ``sandbox``) and return its deployment id."""
        deployment = self.deployment(root, **changes)
        self.run(self.supervisor.deploy(deployment, sandbox=sandbox))
        return deployment.id

    def client(self, deployment_id: str, timeout: float = 20) -> httpx.Client:
        """An HTTP client whose requests go to ``deployment_id``."""
        return httpx.Client(base_url=self.url, headers={HEADER: deployment_id}, timeout=timeout)

    def console(self, deployment_id: str) -> list[str]:
        """Lines a deployment's handlers printed so far."""
        return [
            e.message
            for e in list(self.events.events)
            if isinstance(e, ConsoleEvent) and e.deployment_id == deployment_id
        ]

    def of_type(self, kind: type[T], deployment_id: str) -> list[T]:
        """Events of one type for one deployment."""
        return [
            e
            for e in list(self.events.events)
            if isinstance(e, kind) and getattr(e, "deployment_id", "") == deployment_id
        ]

    def wait_for(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait (on the harness loop, not by sleeping the test) until ``condition()`` holds."""

        async def poll() -> None:
            for _ in range(int(timeout / 0.01)):
                if condition():
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("condition not met in time")

        self.run(poll(), timeout=timeout + 5)

    def tracker(self) -> slow_binding.Tracker:
        """What the test binding's services recorded."""
        return self.supervisor.resources.shared(slow_binding.TRACKER_KEY, slow_binding.Tracker)

    async def _stop(self) -> None:
        await self._serving
        await self.supervisor.close()

    def close(self) -> None:
        """Stop the server and the supervisor."""
        self._server.should_exit = True
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def write_project(root: Path, worker: str, config: str = "", main: str = "worker.py") -> Path:
    """Write ``worker.py`` and ``ember.yaml`` (name from the directory) into ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / main).parent.mkdir(parents=True, exist_ok=True)
    (root / main).write_text(textwrap.dedent(worker))
    header = f"name: {root.name}\nmain: {main}\n"
    (root / "ember.yaml").write_text(header + textwrap.dedent(config))
    return root


def _header(scope: dict[str, Any], name: str) -> str | None:
    key = name.encode()
    for header, value in scope["headers"]:
        if header == key:
            return value.decode()
    return None
