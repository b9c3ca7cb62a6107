"""Each request is charged the CPU its own code ran, not its isolate's (as on Cloudflare).

Requests of one deployment share an isolate; while one spins, another that only waits (a sleep,
a binding call) used to be charged its neighbour's CPU: failed 1102 after the neighbours spent
its limit, and logged with the isolate's whole CPU. The isolate meters each request's task
steps; the supervisor uses that split to pick who is over and what each one logs, and keeps its
own bound on the isolate's total (``cpushare.py``; a forged split: ``test_cpu_forged.py``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from ember.runtime.events import RequestEvent
from tests.runtime.harness import Harness, write_project

NEIGHBOURS = """
import asyncio
import time
from workers import Response

spun = asyncio.Event()
spinning = asyncio.Event()

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

async def fetch(request, env, ctx):
    path = request.url.split("/")[-1]
    if path == "spinner":  # 44 ms of its own, in four steps
        for _ in range(4):
            spin(0.011)
            await asyncio.sleep(0.005)
        spun.set()
        return Response("spun")
    if path == "waiter":  # waits out the spinner, then 35 ms of its own
        await asyncio.wait_for(spun.wait(), 20)
        spin(0.035)
        return Response("waited")
    if path == "forever":
        spinning.set()
        while True:
            pass
    if path == "patient":  # waits while "forever" spins, and after
        await asyncio.wait_for(spinning.wait(), 20)
        await asyncio.sleep(0.3)
        return Response("patient")
    return Response("fine")
"""


def _both(harness: Harness, deployment_id: str, first: str, second: str) -> list[httpx.Response]:
    """GET ``first`` and, once it is in flight, ``second``, concurrently; both replies."""
    with harness.client(deployment_id) as client, ThreadPoolExecutor(2) as pool:
        started = pool.submit(client.get, f"/{first}")
        process = harness.supervisor.isolate(deployment_id)
        assert process is not None
        harness.wait_for(lambda: len(process.inflight) == 1)
        other = pool.submit(client.get, f"/{second}")
        return [started.result(30), other.result(30)]


def _logged(harness: Harness, deployment_id: str) -> dict[str, RequestEvent]:
    return {e.url.split("/")[-1]: e for e in harness.of_type(RequestEvent, deployment_id)}


def test_a_waiting_request_is_not_charged_its_spinning_neighbours_cpu(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "neighbours", NEIGHBOURS)
    deployment_id = harness.deploy(root, limits={"cpu_ms": 50})
    waiter, spinner = _both(harness, deployment_id, "waiter", "spinner")
    assert (spinner.status_code, spinner.text) == (200, "spun")
    assert (waiter.status_code, waiter.text) == (200, "waited")  # 79 ms in its lifetime
    harness.wait_for(lambda: len(_logged(harness, deployment_id)) == 2)
    logged = _logged(harness, deployment_id)
    # Each logs its own CPU: under the limit, the spinner's more than the waiter's.
    assert 35 <= logged["waiter"].cpu_ms < 50, logged
    assert 44 <= logged["spinner"].cpu_ms < 50, logged
    assert logged["waiter"].cpu_ms < logged["spinner"].cpu_ms


def test_a_spinner_past_its_limit_ends_alone(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "spinner", NEIGHBOURS)
    deployment_id = harness.deploy(root, limits={"cpu_ms": 50})
    patient, forever = _both(harness, deployment_id, "patient", "forever")
    assert forever.status_code == 503 and forever.headers["x-ember-error"] == "cpu_limit"
    assert (patient.status_code, patient.text) == (200, "patient")
    harness.wait_for(lambda: len(_logged(harness, deployment_id)) == 2)
    logged = _logged(harness, deployment_id)
    assert logged["forever"].outcome == "cpu_limit" and logged["forever"].cpu_ms >= 50
    assert logged["patient"].outcome == "ok" and logged["patient"].cpu_ms < 50
