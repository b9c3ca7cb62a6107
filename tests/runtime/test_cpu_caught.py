"""A request past its CPU limit ends with the platform's limit error whatever its code does.

The supervisor raises ``CpuLimitInterrupt`` into the running code (SIGXCPU); a handler that
catches it (``except BaseException``) and returns, raises something else, or ends its stream
normally used to get its own answer through (a 200 with ``cpu_ms`` past the limit). On
Cloudflare, exceeding CPU ends the invocation with 1102 whatever the code does; here too: the
request is answered (or its stream cut) as in the uncaught case, logged the same way, and its
isolate replaced. A cron that does the same ends ``cpu_limit``.

The isolate's own code keeps the interrupt on the event's scope, but a hostile handler can take
the signal away from it (``signal.signal(SIGXCPU, ...)``): then the supervisor, which sent the
signal for that request, holds the request to the limit itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from ember.runtime.events import LifecycleEvent, RequestEvent
from ember.runtime.process import IsolateProcess
from tests.runtime.harness import Harness, write_project

CAUGHT = """
import asyncio
import signal
from workers import Response

def spin():
    try:
        while True:
            pass
    except BaseException:
        pass

def spin_deaf():
    # Spin until the supervisor's signal arrives, which no ember code ever sees.
    heard = []
    signal.signal(signal.SIGXCPU, lambda *_: heard.append(1))
    while not heard:
        pass

async def fetch(request, env, ctx):
    kind = request.headers.get("x-kind")
    if kind == "uncaught":
        while True:
            pass
    if kind == "return":
        spin()
        return Response("escaped the CPU limit")
    if kind == "raise":
        spin()
        raise ValueError("something else")
    if kind == "call":
        spin()
        try:
            await env.SLOW.wait("after the limit")
        except Exception:
            pass
        return Response("called on past the CPU limit")
    if kind == "deaf":
        spin_deaf()
        return Response("escaped the CPU limit")
    if kind in ("stream", "deaf-stream"):
        async def body():
            yield b"first chunk\\n"
            await asyncio.sleep(0.2)  # the head and first chunk leave before the spin
            if kind == "stream":
                spin()
                yield b"after the limit\\n"
            else:
                spin_deaf()
        return Response(body())
    return Response("fine")

async def scheduled(controller, env, ctx):
    if controller.cron == "deaf":
        spin_deaf()
    elif controller.cron == "stubborn":
        while True:
            spin()
    else:
        spin()
"""


def _current(harness: Harness, deployment_id: str) -> IsolateProcess:
    process = harness.supervisor.isolate(deployment_id)
    assert process is not None
    return process


def _deploy(harness: Harness, tmp_path: Path, name: str) -> str:
    root = write_project(tmp_path / name, CAUGHT, "slow:\n  binding: SLOW\n")
    return harness.deploy(root, limits={"cpu_ms": 100})


def _logged(harness: Harness, deployment_id: str) -> tuple[list[tuple[int, str]], list[str]]:
    """(status, outcome) of each request event, and the warn lines, of one deployment."""
    requests = [(e.status, e.outcome) for e in harness.of_type(RequestEvent, deployment_id)]
    lines = [e.message for e in harness.of_type(LifecycleEvent, deployment_id)]
    return requests, lines


@pytest.mark.parametrize("kind", ["return", "raise", "deaf"])
def test_a_caught_interrupt_is_answered_and_logged_as_the_uncaught_one(
    harness: Harness, tmp_path: Path, kind: str
) -> None:
    uncaught = _deploy(harness, tmp_path, "uncaught")
    caught = _deploy(harness, tmp_path, f"caught-{kind}")
    first = _current(harness, caught)
    with harness.client(uncaught) as plain, harness.client(caught) as client:
        reference = plain.get("/", headers={"x-kind": "uncaught"})
        answered = client.get("/", headers={"x-kind": kind})
        after = client.get("/")
    assert reference.status_code == 503 and reference.headers["x-ember-error"] == "cpu_limit"
    assert answered.status_code == reference.status_code, answered.text
    assert answered.headers["x-ember-error"] == "cpu_limit"
    assert answered.text == reference.text  # "Worker exceeded CPU time limit. (error code: 1102)"
    assert after.text == "fine"
    assert _current(harness, caught) is not first  # replaced, as after the uncaught one
    harness.wait_for(lambda: len(_logged(harness, caught)[0]) == 2)
    requests, lines = _logged(harness, caught)
    reference_requests, reference_lines = _logged(harness, uncaught)
    assert requests[0] == reference_requests[0] == (503, "cpu_limit")
    assert lines == reference_lines, (lines, reference_lines)


@pytest.mark.parametrize("kind", ["stream", "deaf-stream"])
def test_a_caught_interrupt_cuts_a_streamed_response(
    harness: Harness, tmp_path: Path, kind: str
) -> None:
    caught = _deploy(harness, tmp_path, f"caught-{kind}")
    with harness.client(caught) as client:
        with client.stream("GET", "/", headers={"x-kind": kind}) as response:
            assert response.status_code == 200  # the head went out before the spin
            received = b""
            with pytest.raises(httpx.RemoteProtocolError):
                for chunk in response.iter_bytes():
                    received += chunk
        assert client.get("/").text == "fine"
    assert received == b"first chunk\n"
    harness.wait_for(lambda: len(_logged(harness, caught)[0]) == 2)
    assert _logged(harness, caught)[0][0] == (200, "cpu_limit")


@pytest.mark.parametrize("cron", ["* * * * *", "deaf"])
def test_a_cron_that_catches_the_interrupt_ends_cpu_limit(
    harness: Harness, tmp_path: Path, cron: str
) -> None:
    caught = _deploy(harness, tmp_path, "caught-cron")
    first = _current(harness, caught)
    result = harness.run(harness.supervisor.scheduled(caught, cron))
    assert result.outcome == "cpu_limit", result
    with harness.client(caught) as client:
        assert client.get("/").text == "fine"
    assert _current(harness, caught) is not first


def test_a_cron_that_never_stops_ends_cpu_limit_and_the_others_are_told_why(
    harness: Harness, tmp_path: Path
) -> None:
    """One isolate runs a worker's crons and requests (so does Cloudflare's), one event's code
    at a time: a cron spinning past its limit, catching every interrupt, blocks a request that
    arrives meanwhile, and killing the isolate ends both. The request is told why it was
    stopped, not that it exceeded a CPU limit of its own."""
    caught = _deploy(harness, tmp_path, "stubborn-cron")
    process = _current(harness, caught)
    cron = asyncio.run_coroutine_threadsafe(
        harness.supervisor.scheduled(caught, "stubborn"), harness.loop
    )
    harness.wait_for(lambda: len(process.inflight) == 1)
    with harness.client(caught) as client:
        stopped = client.get("/")
        after = client.get("/")
    assert cron.result(30).outcome == "cpu_limit"
    assert stopped.status_code == 503, stopped.text
    assert stopped.headers["x-ember-error"] == "isolate_restarted"
    assert "did not stop at its CPU limit" in stopped.text
    assert after.text == "fine"


def test_a_binding_call_after_a_caught_interrupt_raises_it_again(
    harness: Harness, tmp_path: Path
) -> None:
    caught = _deploy(harness, tmp_path, "caught-call")
    with harness.client(caught) as client:
        answered = client.get("/", headers={"x-kind": "call"})
    assert answered.status_code == 503 and answered.headers["x-ember-error"] == "cpu_limit"
    assert harness.tracker().get("wait-started:after the limit") == 0  # it never left
