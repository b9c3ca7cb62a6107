"""Fixtures: a real control plane in a temp dir, served by uvicorn on an ephemeral loopback port."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from ember.runtime.api.app import create_api_app
from ember.runtime.api.live import LiveHooks
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.config import PlatformConfig, ProofOfWorkConfig
from ember.runtime.deployments.multipart import Part, build_multipart
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.tail_events import TailHub

# Small difficulty: the tests exercise the protocol, bench/deploy.py measures the cost.
TEST_CONFIG = PlatformConfig(
    max_script_bytes=4 * 1024**2, proof_of_work=ProofOfWorkConfig(k=64, g=64, sample=8)
)


@dataclass
class RunningPlatform:
    plane: ControlPlane
    clock: ManualClock
    url: str  # http://127.0.0.1:PORT
    api: str  # url + /client/v4
    hub: TailHub

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.api, headers=headers, timeout=30)


class ServerThread:
    """uvicorn in a thread of the test process, bound to 127.0.0.1:0."""

    def __init__(self, app: object, host: str = "127.0.0.1") -> None:
        config = uvicorn.Config(app, host=host, port=0, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self.server.servers[0].sockets[0].getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def start_platform(
    state_dir: Path, config: PlatformConfig = TEST_CONFIG, live: LiveHooks | None = None
) -> tuple[ControlPlane, ManualClock, ServerThread, TailHub]:
    clock = ManualClock()
    plane = ControlPlane(state_dir, config, clock=clock)
    hub = TailHub()
    return plane, clock, ServerThread(create_api_app(plane, hub, live=live)), hub


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[RunningPlatform]:
    plane, clock, server, hub = start_platform(tmp_path / "state")
    with server as port:
        url = f"http://127.0.0.1:{port}"
        yield RunningPlatform(plane, clock, url, url + "/client/v4", hub)
    plane.close()


@pytest.fixture
def tenant(platform: RunningPlatform) -> tuple[str, httpx.Client]:
    """A permanent account ("mallory") and a client with its token."""
    account, issued = platform.plane.accounts.create_permanent("mallory")
    return account.id, platform.client(issued.token)


def worker_upload(
    main: str = "entry.py",
    source: bytes = b"print('hi')\n",
    bindings: list[dict[str, object]] | None = None,
    extra_parts: list[Part] | None = None,
    metadata_first: bool = True,
    **metadata: object,
) -> tuple[bytes, str]:
    """A wrangler-shaped multipart upload: (body, content type)."""
    meta = {
        "main_module": main,
        "bindings": bindings or [],
        "compatibility_date": "2026-11-01",
        "compatibility_flags": ["python_workers"],
        **metadata,
    }
    meta_part = Part("metadata", None, None, json.dumps(meta).encode())
    modules = [Part(main, main, "text/x-python", source), *(extra_parts or [])]
    parts = [meta_part, *modules] if metadata_first else [*modules, meta_part]
    boundary = "----formdata-ember-test-7d2f"
    return build_multipart(parts, boundary), f"multipart/form-data; boundary={boundary}"
