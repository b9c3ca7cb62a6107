"""Tasks a handler starts without ``waitUntil`` end with its request, as on Cloudflare.

workerd cancels every outstanding task of a request when its IoContext goes: once the response
(body included) is sent and the ``waitUntil`` work is done. Until then such a task runs; after
it, it is cancelled, and only that request's tasks are.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.runtime.harness import Harness, write_project

STRAY = """
import asyncio
from workers import Response

SHARED = {}

async def stray(tag):
    try:
        await asyncio.sleep(30)
        print("stray finished", tag)
    except asyncio.CancelledError:
        print("stray cancelled", tag)
        raise

async def held():
    await asyncio.sleep(0.2)
    print("held done")

async def fetch(request, env, ctx):
    path = request.url.rsplit("/", 1)[1]
    if path == "start":
        asyncio.create_task(stray("task"))
        asyncio.ensure_future(stray("future"))
        ctx.wait_until(held())
        return Response("started")
    if path == "stream":
        seen = asyncio.Event()

        async def mark():
            await asyncio.sleep(0)
            seen.set()

        asyncio.create_task(mark())  # runs after the handler returned, while the body streams

        async def body():
            yield b"waiting "
            await seen.wait()
            yield b"seen"

        return Response(body())
    if path == "share":
        SHARED["task"] = asyncio.create_task(asyncio.sleep(30))
        return Response("shared")
    if path == "await-shared":
        await SHARED["task"]
        return Response("not reached")
    return Response("next ok")
"""


def test_stray_tasks_are_cancelled_after_wait_until_work(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(write_project(tmp_path / "stray", STRAY))
    with harness.client(deployment_id) as client:
        assert client.get("/start").text == "started"
        harness.wait_for(
            lambda: (
                {"stray cancelled task", "stray cancelled future"}
                <= set(harness.console(deployment_id))
            )
        )
        lines = harness.console(deployment_id)
        # The request lived on for its waitUntil work, and the strays with it.
        assert lines.index("held done") < lines.index("stray cancelled task")
        assert "stray finished task" not in lines
        # The same isolate answers the next request as usual: nothing of the cancel reaches it.
        assert client.get("/next").text == "next ok"


def test_stray_task_runs_while_the_body_streams(harness: Harness, tmp_path: Path) -> None:
    deployment_id = harness.deploy(write_project(tmp_path / "stream", STRAY))
    with harness.client(deployment_id) as client:
        assert client.get("/stream").text == "waiting seen"


def test_awaiting_another_requests_cancelled_task_is_an_error(
    harness: Harness, tmp_path: Path
) -> None:
    """A later request that awaits a task the earlier one left behind gets an error naming why,
    not a response that never comes nor a silent cancellation of its own."""
    deployment_id = harness.deploy(write_project(tmp_path / "shared", STRAY))
    with harness.client(deployment_id) as client:
        assert client.get("/share").text == "shared"
        response = client.get("/await-shared")
        assert response.status_code == 500
        assert "cancelled when the request that started it ended" in response.text
        assert client.get("/next").text == "next ok"


SWALLOW = """
import asyncio
from workers import Response

STATE = {"n": 0}

async def spin():
    while True:
        try:
            await asyncio.sleep(0)
        except BaseException:  # the cancellation, every time it comes (GeneratorExit too)
            STATE["n"] += 1

async def fetch(request, env, ctx):
    path = request.url.rsplit("/", 1)[1]
    if path == "spin":
        asyncio.create_task(spin())
        await asyncio.sleep(0.01)
        return Response("spun")
    if path == "slow":
        await asyncio.sleep(0.5)
        return Response("slow done")
    return Response(str(STATE["n"]))
"""


def test_a_stray_task_that_swallows_its_cancellation_is_closed(
    harness: Harness, tmp_path: Path
) -> None:
    """Thrown the cancellation again and swallowing it again, its coroutine is closed: it does
    not spin on unmetered (the idle watchdog killed the isolate), nor is it charged to a
    request that runs beside it (which got 503 for its CPU)."""
    deployment_id = harness.deploy(
        write_project(tmp_path / "swallow", SWALLOW), limits={"cpu_ms": 50}
    )
    with harness.client(deployment_id) as client:
        beside: list[str] = []  # a request running while the stray spins
        slow = threading.Thread(target=lambda: beside.append(client.get("/slow").text))
        slow.start()
        assert client.get("/spin").text == "spun"
        slow.join()
        assert beside == ["slow done"]  # was 503: charged the stray's spinning
        settled = client.get("/count").text
        assert client.get("/slow").text == "slow done"
        assert client.get("/count").text == settled  # it ran no more
        # cancelled, thrown it again, closed (GeneratorExit), closed once more when collected
        assert int(settled) <= 4


def test_cancelling_a_requests_stray_tasks_is_told_on_the_log(
    harness: Harness, tmp_path: Path
) -> None:
    """A lazily started background consumer cancelled with its first request leaves later
    requests waiting on it with no word: the cancellation is one warning line (rate-limited)."""
    deployment_id = harness.deploy(write_project(tmp_path / "told", STRAY))
    told = "started without ctx.waitUntil cancelled when request"
    with harness.client(deployment_id) as client:
        assert client.get("/start").text == "started"
        harness.wait_for(lambda: any(told in line for line in harness.console(deployment_id)))
        assert client.get("/start").text == "started"
        harness.wait_for(lambda: harness.console(deployment_id).count("stray cancelled task") == 2)
        assert client.get("/next").text == "next ok"
        assert client.get("/stream").text == "waiting seen"  # nothing left running: no notice
    notices = [line for line in harness.console(deployment_id) if told in line]
    assert len(notices) == 1, notices  # the second within the rate limit's window
    assert notices[0].startswith("2 tasks started without ctx.waitUntil")


SHARED_WAIT = """
import asyncio
from workers import Response

SHARED = {}

async def produce(gate):
    await gate.wait()
    return 42

async def stray():
    try:
        await SHARED["awaited"]
    except asyncio.CancelledError:
        print("stray cancelled")
        raise

async def fetch(request, env, ctx):
    path = request.url.rsplit("/", 1)[1]
    if path in ("b-future", "b-task"):
        SHARED["gate"] = gate = asyncio.Event()
        if path == "b-future":  # a module-level future, resolved by a later request
            SHARED["awaited"] = asyncio.get_running_loop().create_future()
        else:  # a task of this request, cached where another request finds it
            SHARED["awaited"] = asyncio.create_task(produce(gate))
        print("b waiting")
        try:
            value = await SHARED["awaited"]
        except asyncio.CancelledError:
            return Response("b cancelled", status=500)
        return Response(f"b got {value}")
    if path == "a":
        asyncio.create_task(stray())  # no waitUntil: cancelled when this request ends
        await asyncio.sleep(0)
        return Response("a done")
    if path == "resolve":
        awaited = SHARED["awaited"]
        if isinstance(awaited, asyncio.Task):
            SHARED["gate"].set()
        else:
            awaited.set_result(42)
        return Response("resolved")
    return Response("next ok")
"""


@pytest.mark.parametrize("kind", ["future", "task"])
def test_a_stray_tasks_end_leaves_what_it_awaited_to_the_others(
    harness: Harness, tmp_path: Path, kind: str
) -> None:
    """Request A's stray task awaits a future (or a task) that request B, still in flight,
    awaits too. A's end cancels its stray only: asyncio's ``task.cancel()`` cancels the future
    the task waits on, which handed B a CancelledError for A's leftover."""
    deployment_id = harness.deploy(write_project(tmp_path / f"shared-{kind}", SHARED_WAIT))
    with harness.client(deployment_id) as client:
        got: list[str] = []
        b = threading.Thread(target=lambda: got.append(client.get(f"/b-{kind}").text))
        b.start()
        harness.wait_for(lambda: "b waiting" in harness.console(deployment_id))
        assert client.get("/a").text == "a done"
        harness.wait_for(lambda: "stray cancelled" in harness.console(deployment_id))
        assert client.get("/resolve").text == "resolved"
        b.join()
        assert got == ["b got 42"]
        assert client.get("/next").text == "next ok"
