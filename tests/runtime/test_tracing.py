"""Whole-invocation reports for traced deployments (what ``tail`` shows), and idle eviction."""

from __future__ import annotations

from pathlib import Path

from ember.runtime.events import InvocationEvent
from tests.runtime.harness import Harness, write_project

WORKER = """\
from workers import Response
import js

async def on_fetch(request, env, ctx):
    print("line one")
    js.console.warn("careful", 42)
    if "boom" in request.url:
        raise ValueError("kaboom")
    return Response("ok", status=201)

async def on_scheduled(controller, env, ctx):
    print("tick", controller.cron)
"""


def test_traced_invocations_carry_logs_exceptions_and_request(
    harness: Harness, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "traced", WORKER)
    traced = harness.deploy(project)
    untraced = harness.deploy(project)
    harness.supervisor.tracing = lambda deployment_id: deployment_id == traced
    try:
        with harness.client(traced) as client:
            assert client.get("/hello", headers={"x-probe": "1"}).status_code == 201
            assert client.get("/boom").status_code == 500
            assert client.get("/__scheduled?cron=*/5+*+*+*+*").status_code == 200
        with harness.client(untraced) as client:
            assert client.get("/hello").status_code == 201
        harness.wait_for(lambda: len(harness.of_type(InvocationEvent, traced)) == 3)
    finally:
        harness.supervisor.tracing = None
    assert harness.of_type(InvocationEvent, untraced) == []
    ok, failed, cron = harness.of_type(InvocationEvent, traced)
    assert (ok.kind, ok.outcome, ok.status, ok.method) == ("fetch", "ok", 201, "GET")
    assert ok.url.endswith("/hello") and ("x-probe", "1") in ok.headers
    assert [(level, text) for level, text, _ in ok.logs] == [
        ("log", "line one"),
        ("warn", "careful 42"),
    ]
    assert ok.exceptions == () and ok.started_ms > 0 and ok.wall_ms >= 0
    assert (failed.outcome, failed.status) == ("exception", 500)
    assert len(failed.exceptions) == 1 and "kaboom" in failed.exceptions[0][0]
    assert "ValueError" in failed.exceptions[0][1]
    assert (cron.kind, cron.cron, cron.outcome) == ("scheduled", "*/5 * * * *", "ok")
    assert [text for _, text, _ in cron.logs] == ["tick */5 * * * *"]


def evict_idle(harness: Harness, idle_s: float) -> list[str]:
    """``Supervisor.evict_idle`` on the supervisor's loop, as the platform's sweep calls it:
    it schedules the drain's kill timer, and asyncio's timer heap is not thread-safe (called
    from the test's thread it once raised "list changed size during iteration" under load)."""

    async def on_loop() -> list[str]:
        return harness.supervisor.evict_idle(idle_s)

    return harness.run(on_loop())


def test_evict_idle_stops_isolates_and_next_request_restarts(
    harness: Harness, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "idle", WORKER)
    deployment_id = harness.deploy(project)
    with harness.client(deployment_id) as client:
        assert client.get("/").status_code == 201
        first = harness.supervisor.isolate(deployment_id)
        assert first is not None
        assert deployment_id not in evict_idle(harness, 3600.0)
        assert harness.supervisor.isolate(deployment_id) is first
        assert deployment_id in evict_idle(harness, 0.0)
        assert harness.supervisor.isolate(deployment_id) is None
        harness.wait_for(lambda: first.state.value == "dead")
        assert client.get("/").status_code == 201
        second = harness.supervisor.isolate(deployment_id)
        assert second is not None and second is not first and second.pid != first.pid
