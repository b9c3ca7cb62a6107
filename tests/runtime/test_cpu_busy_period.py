"""An honest isolate is never stopped by its own overhead, however long its requests overlap.

The supervisor holds an isolate's process CPU over a busy period (from a request arriving at an
idle isolate until none is in flight) to its requests' limits (``cpushare.py``). A finished
request used to add only the CPU its own code reported, which leaves out the isolate's own work
for it (decoding the request before its event starts, encoding Done after it leaves): with
requests overlapping without a pause the period never ends, that overhead piled up, and an
innocent hello-world request was stopped at its CPU limit (1102) and its isolate replaced.
The other side of the bound, a lying isolate still stopped: ``test_cpu_forged.py``.
"""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import httpx

from ember.runtime import cpushare
from ember.runtime.events import LifecycleEvent, RequestEvent
from tests.runtime.harness import HEADER, Harness, write_project

HELLO = """
import asyncio
from workers import Response

async def fetch(request, env, ctx):
    await asyncio.sleep(0.02)
    return Response("hi")
"""
CLIENTS = 8
REQUESTS_EACH = 150  # ~1,200 overlapping requests: the overhead of a few hundred passed 8 limits


async def _load(url: str, deployment_id: str) -> collections.Counter[tuple[int, str | None]]:
    codes: collections.Counter[tuple[int, str | None]] = collections.Counter()
    headers = {HEADER: deployment_id}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:

        async def one() -> None:
            for _ in range(REQUESTS_EACH):
                reply = await client.get("/")
                codes[(reply.status_code, reply.headers.get("x-ember-error"))] += 1

        await asyncio.gather(*[one() for _ in range(CLIENTS)])
    return codes


def test_overlapping_cheap_requests_never_hit_the_isolates_bound(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "hello", HELLO)
    deployment_id = harness.deploy(root, limits={"cpu_ms": 10})
    codes = asyncio.run(_load(harness.url, deployment_id))
    assert codes == {(200, None): CLIENTS * REQUESTS_EACH}, codes
    harness.wait_for(
        lambda: len(harness.of_type(RequestEvent, deployment_id)) == CLIENTS * REQUESTS_EACH
    )
    outcomes = collections.Counter(e.outcome for e in harness.of_type(RequestEvent, deployment_id))
    assert outcomes == {"ok": CLIENTS * REQUESTS_EACH}, outcomes
    lines = [e.message for e in harness.of_type(LifecycleEvent, deployment_id)]
    assert not any("CPU" in line for line in lines), lines


class _Finished:
    def __init__(self, cpu_known: float, cpu_final: bool = True) -> None:
        self.cpu_known = cpu_known
        self.cpu_final = cpu_final


def test_a_finished_request_adds_its_share_of_the_overhead_never_past_its_limit() -> None:
    limit = 0.01
    in_flight = [_Finished(0.0005), _Finished(0.002), _Finished(0.5)]  # the last one: a liar's
    # 30 ms of process CPU: 2.5 + 10 (capped) of figures, 17.5 ms that no figure covers.
    unclaimed = cpushare.uncounted(0.03, 0.0, in_flight, limit)
    assert abs(unclaimed - 0.0175) < 1e-9
    # Its figure plus a third of the rest, below its limit; then at most its limit.
    assert abs(cpushare.charge(in_flight[0], limit, unclaimed, 3) - (0.0005 + 0.0175 / 3)) < 1e-9
    assert cpushare.charge(in_flight[1], limit, 1.0, 3) == limit
    # A figure past the limit keeps the interrupt grace, as before; no figure: its limit.
    assert cpushare.charge(in_flight[2], limit, 1.0, 3) == limit + cpushare.GRACE_CPU_S
    assert cpushare.charge(_Finished(0.0, cpu_final=False), limit, 1.0, 3) == limit
