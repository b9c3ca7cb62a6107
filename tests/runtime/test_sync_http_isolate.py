"""Sync HTTP calls are subrequests like fetch(): counted against the deployment's limit,
checked against the network policy, and the isolate they block keeps every other request's
frames (its other requests are answered correctly once the call returns)."""

from __future__ import annotations

import importlib.util
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ember.runtime.subrequest import NetworkPolicy
from tests.runtime.harness import Harness, write_project
from tests.runtime.sync_http_support import WORKER
from tests.runtime.upstream import Upstream, ask_worker


def test_sync_calls_count_against_the_subrequest_limit(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    worker = harness.deploy(write_project(tmp_path / "limited", WORKER), limits={"subrequests": 3})
    results = ask_worker(harness, worker, upstream, "requests-many?4")
    assert results[:3] == [200, 200, 200]
    assert results[3]["error"] == "ConnectionError"
    assert "Too many subrequests." in results[3]["message"]  # the platform's message


def test_a_host_the_policy_refuses_fails_with_each_librarys_exception(
    upstream: Upstream, tmp_path: Path
) -> None:
    harness = Harness(tmp_path / "state", network=NetworkPolicy(allow_loopback=False))
    try:
        worker = harness.deploy(write_project(tmp_path / "refused", WORKER))
        before = len(upstream.seen)
        got = ask_worker(harness, worker, upstream, "refused")
    finally:
        harness.close()
    libraries = {"requests", "urllib3", "httpx", "httpx-async"}
    assert set(got) == libraries | ({"aiohttp"} if _installed("aiohttp") else set())
    assert got["requests"]["error"] == "ConnectionError"
    assert got["urllib3"]["error"] == "NewConnectionError"
    assert got["httpx"]["error"] == got["httpx-async"]["error"] == "ConnectError"
    assert got.get("aiohttp", {"error": "ClientConnectorError"})["error"] == "ClientConnectorError"
    for failure in got.values():
        assert "loopback address (network policy)" in failure["message"]
    assert len(upstream.seen) == before  # nothing reached the upstream


def test_frames_for_other_requests_arriving_during_a_blocking_call_are_kept(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    """Request A awaits fetch(/hold); B, on the same isolate, opens the gate with a blocking
    requests.get. A's reply arrives while B blocks the loop (B's pump reads it): A must still
    get it, and the isolate must go on serving."""
    worker = harness.deploy(write_project(tmp_path / "same", WORKER))
    ask_worker(harness, worker, upstream, "mixed?0")  # the isolate is up
    process = harness.supervisor.isolate(worker)
    assert process is not None
    held: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: held.update(ask_worker(harness, worker, upstream, "hold?gate-1"))
    )
    thread.start()
    harness.wait_for(lambda: "gate-1" in upstream.held)
    released = ask_worker(harness, worker, upstream, "release?gate-1")
    assert released == {
        "release": "opened gate-1",
        "then": "chunk-0;chunk-1;chunk-2;chunk-3;chunk-4;",
    }
    thread.join(30)
    assert held == {"held": "released gate-1"}
    assert ask_worker(harness, worker, upstream, "mixed?7") == {"sync": "7", "async": "7"}
    assert harness.supervisor.isolate(worker) is process  # the same isolate throughout


def test_concurrent_sync_and_async_subrequests_each_get_their_own_answer(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    worker = harness.deploy(write_project(tmp_path / "burst", WORKER))
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda n: ask_worker(harness, worker, upstream, f"mixed?{n}"), range(24))
        )
    assert answers == [{"sync": str(n), "async": str(n)} for n in range(24)]


def test_a_client_that_leaves_cancels_the_blocking_call_and_the_isolate_serves_on(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    worker = harness.deploy(write_project(tmp_path / "leaver", WORKER))
    ask_worker(harness, worker, upstream, "mixed?0")
    process = harness.supervisor.isolate(worker)
    with harness.client(worker, timeout=1) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/never", headers={"x-upstream": upstream.url})
    assert ask_worker(harness, worker, upstream, "mixed?1") == {"sync": "1", "async": "1"}
    assert harness.supervisor.isolate(worker) is process


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
