"""A request that ignores its cancellation and the other requests of its isolate (cancelgrace).

A handler that catches its cancellation and goes on (the isolate's loop still runs) is abandoned:
the isolate takes no new requests, the others in flight are served to their end, and then the
isolate is closed. A handler that blocks the isolate's loop gets it killed at once, and the
others are told why (not the culprit's "exceeded wall time limit"). The wall-time deadline and
the grace are driven by calling ``check_deadline`` with a later ``now``: no test waits for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from ember.runtime import events as E
from ember.runtime.http import HttpRequest
from ember.runtime.inflight import CANCEL_GRACE_S, InFlight
from ember.runtime.lifecycle import State
from tests.runtime.harness import Harness, write_project

WORKER = """
import asyncio
import time
from workers import Response, WorkerEntrypoint


async def relay(stream):
    async for chunk in stream:
        yield chunk


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kind = request.headers.get("x-kind", "")
        if kind == "stubborn":  # catches its cancellation and goes on
            print("stubborn started")
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    print("stubborn ignores its cancellation")
        if kind == "block":  # blocks the isolate's event loop
            print("block started")
            await asyncio.sleep(0.05)  # (the line goes out first)
            time.sleep(3600)
        if kind == "relay":  # a stream through the isolate: its frames keep coming
            stream = relay(await self.env.SLOW.stream(request.headers["x-tag"]))
            return Response(stream, headers={"content-type": "text/event-stream"})
        if kind == "wait":
            await self.env.SLOW.wait(request.headers["x-tag"])
        return Response("fine")
"""


def _deploy(harness: Harness, tmp_path: Path) -> str:
    root = write_project(tmp_path / "grace", WORKER, "slow:\n  binding: SLOW\n")
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        assert client.get("/").text == "fine"  # an isolate is ready
    return deployment


def _send(harness: Harness, deployment: str, kind: str, tag: str = "") -> InFlight:
    headers = [("x-kind", kind), ("x-tag", tag)]
    request = harness.supervisor.fetch_ready(
        deployment, HttpRequest("GET", f"http://g/{kind}", headers)
    )
    assert request is not None
    return request


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):  # a bound far above what it takes
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def _cancel_and_pass_the_grace(request: InFlight) -> tuple[float, float, float]:
    """The ``now`` of the poll that cancels ``request``, one at half its grace, one past it."""
    cancel_at = request.deadline + 1
    return cancel_at, cancel_at + CANCEL_GRACE_S / 2 + 0.1, cancel_at + CANCEL_GRACE_S + 1


def test_a_request_that_ignores_cancellation_lets_the_others_finish(
    harness: Harness, tmp_path: Path
) -> None:
    deployment = _deploy(harness, tmp_path)
    process = harness.supervisor.isolate(deployment)
    assert process is not None
    console = lambda: harness.console(deployment)  # noqa: E731

    async def scenario() -> list[bytes]:
        other = _send(harness, deployment, "relay", "grace-other")
        body = (await other.head).body
        chunks = [await body.__anext__()]  # type: ignore[union-attr]
        stubborn = _send(harness, deployment, "stubborn")
        await _until(lambda: "stubborn started" in console())
        cancel_at, half_grace, past_grace = _cancel_and_pass_the_grace(stubborn)
        stubborn.check_deadline(cancel_at)  # its wall limit: the client gets its 504
        assert (await stubborn.head).status == 504
        await _until(lambda: "stubborn ignores its cancellation" in console())
        stubborn.check_deadline(half_grace)
        reads = process.reads
        await _until(lambda: process.reads > reads)  # the other's stream: the loop runs
        stubborn.check_deadline(past_grace)
        assert (
            stubborn.abandoned and process.state is State.DRAINING and other.rid in process.inflight
        )
        chunks.append(await body.__anext__())  # type: ignore[union-attr]  # still served
        await body.aclose()  # type: ignore[union-attr]  # its client leaves: it ends
        assert await other.finished == "canceled"
        await _until(lambda: process.state is State.DEAD)  # closed once the others are done
        return chunks

    chunks = harness.run(scenario())
    assert chunks == [b"data: 0\n\n", b"data: 1\n\n"]
    messages = [e.message for e in harness.of_type(E.LifecycleEvent, deployment)]
    assert any("ignored cancellation; its other requests may finish" in m for m in messages)
    with harness.client(deployment) as client:
        assert client.get("/").text == "fine"  # a fresh isolate
    assert harness.supervisor.isolate(deployment) is not process


def test_an_isolate_whose_loop_is_blocked_is_killed_and_the_others_told_why(
    harness: Harness, tmp_path: Path
) -> None:
    deployment = _deploy(harness, tmp_path)
    process = harness.supervisor.isolate(deployment)
    assert process is not None
    tracker = harness.tracker()

    async def scenario() -> tuple[int, bytes, str]:
        other = _send(harness, deployment, "wait", "grace-blocked")
        await _until(lambda: tracker.get("wait-started:grace-blocked") == 1)
        blocked = _send(harness, deployment, "block")
        await _until(lambda: "block started" in harness.console(deployment))
        cancel_at, half_grace, past_grace = _cancel_and_pass_the_grace(blocked)
        blocked.check_deadline(cancel_at)
        blocked.check_deadline(half_grace)
        blocked.check_deadline(past_grace)
        head = await other.head
        assert isinstance(head.body, bytes)
        return head.status, head.body, blocked.outcome

    status, body, outcome = harness.run(scenario())
    rid = body.decode().split("request ", 1)[1].split()[0]
    assert status == 503
    assert body.decode() == (
        f"Worker restarted: request {rid} in the same isolate ignored its cancellation.\n"
    )
    assert outcome == "wall_limit" and process.state is State.DEAD
    with harness.client(deployment) as client:
        assert client.get("/").text == "fine"
