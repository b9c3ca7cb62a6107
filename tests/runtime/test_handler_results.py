"""What a handler's call resolves to, as the platform resolves it: a returned awaitable is
awaited (to any depth, a cycle refused), and scheduled handlers take the platform's arguments."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project


def test_an_awaitable_a_handler_returns_is_awaited_as_the_platform_does(
    harness: Harness, tmp_path: Path
) -> None:
    """workerd awaits the promise of a Python handler's call, and a JS promise adopts a
    thenable it resolves to (Pyodide's proxy of a coroutine is one), however deep: so
    ``return other(request)`` without ``await`` answers with what ``other`` returns, in fetch
    and scheduled alike."""
    root = write_project(
        tmp_path / "unawaited",
        """
        import asyncio
        from workers import Response

        async def inner(request):
            await asyncio.sleep(0)
            return Response("inner " + request.method)

        async def middle(request):
            return inner(request)  # a coroutine that returns a coroutine

        def sync_handler_returning_a_task(request):
            return asyncio.ensure_future(inner(request))

        def itself():
            future = asyncio.get_running_loop().create_future()
            future.set_result(future)  # resolves to itself: JS refuses such a promise
            return future

        async def on_fetch(request):
            if request.url.endswith("/task"):
                return sync_handler_returning_a_task(request)
            if request.url.endswith("/cycle"):
                return itself()
            return middle(request)

        async def record(controller):
            print("cron ran", controller.cron)

        async def on_scheduled(controller, env, ctx):
            return record(controller)
        """,
    )
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        nested = client.post("/")
        task = client.get("/task")
        cron = client.get("/__scheduled", params={"cron": "*/7 * * * *"})
        cycle = client.get("/cycle", headers={"accept": "text/plain"})
    assert cycle.status_code == 500 and "Chaining cycle detected for promise" in cycle.text
    assert (nested.status_code, nested.text) == (200, "inner POST")
    assert (task.status_code, task.text) == (200, "inner GET")
    assert cron.status_code == 200
    harness.wait_for(lambda: "cron ran */7 * * * *" in harness.console(deployment_id))


def test_scheduled_handler_runs_with_four_arguments(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "cron",
        """
        from workers import WorkerEntrypoint, Response

        class Default(WorkerEntrypoint):
            async def scheduled(self, controller, env, ctx):
                print("cron", controller.cron, controller.scheduledTime, env is self.env)
        """,
    )
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        response = client.get("/__scheduled", params={"cron": "*/5 * * * *", "time": "1000"})
        no_fetch = client.get("/")
    assert response.status_code == 200
    assert "cron */5 * * * * 1000 True" in harness.console(deployment_id)
    assert no_fetch.status_code == 500 and "does not export a fetch() function" in no_fetch.text
