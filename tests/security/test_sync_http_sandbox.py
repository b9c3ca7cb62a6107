"""Under the sandbox (no INET sockets in isolates), sync HTTP clients work: their requests are
subrequests the supervisor makes, where before they failed with a bare socket error."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.runtime.isolation import SandboxPolicy
from ember.runtime.sandbox import FULL
from ember.runtime.subrequest import NetworkPolicy
from tests.runtime.harness import Harness, write_project
from tests.runtime.sync_http_support import WORKER
from tests.runtime.upstream import Upstream


@pytest.fixture(scope="module")
def sandboxed() -> Iterator[tuple[Harness, str, Upstream]]:
    # Not under pytest's 0700 temp root: a pool uid must reach the code (see conftest.py).
    base = Path(tempfile.mkdtemp(prefix="ember-synchttp-"))
    base.chmod(0o711)
    upstream = Upstream()
    # The operator allows loopback here (the upstream is on it); platforms refuse it by default.
    harness = Harness(
        base / "state",
        dev=False,
        sandbox=SandboxPolicy(default_profile=FULL),
        network=NetworkPolicy(),
    )
    try:
        worker = harness.deploy(write_project(base / "code" / "sync", WORKER))
        yield harness, worker, upstream
    finally:
        harness.close()
        upstream.close()
        shutil.rmtree(base, ignore_errors=True)


def get(sandboxed: tuple[Harness, str, Upstream], route: str) -> Any:
    harness, worker, upstream = sandboxed
    with harness.client(worker, timeout=60) as client:
        response = client.get(f"/{route}", headers={"x-upstream": upstream.url})
    assert response.status_code == 200, response.text
    return response.json()


def test_the_isolate_cannot_open_a_socket_itself(sandboxed: tuple[Harness, str, Upstream]) -> None:
    harness, worker, _ = sandboxed
    process = harness.supervisor.isolate(worker)
    assert process is not None and process.sandbox is not None
    assert get(sandboxed, "raw-socket")["error"] is not None


@pytest.mark.parametrize(
    "route", ["requests-get", "requests-post", "requests-stream", "urllib3", "httpx-sync"]
)
def test_sync_clients_work_in_the_sandbox(
    sandboxed: tuple[Harness, str, Upstream], route: str
) -> None:
    got = get(sandboxed, route)
    assert "error" not in got


def test_async_httpx_works_in_the_sandbox(sandboxed: tuple[Harness, str, Upstream]) -> None:
    assert get(sandboxed, "httpx-async")["echo"]["query"] == {"via": "async"}


def test_aiohttp_works_in_the_sandbox_where_installed(
    sandboxed: tuple[Harness, str, Upstream],
) -> None:
    pytest.importorskip("aiohttp")
    assert get(sandboxed, "aiohttp")["echo"]["query"] == {"via": "aiohttp"}
