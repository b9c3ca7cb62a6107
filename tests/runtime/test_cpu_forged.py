"""A forged CPU split cannot buy an isolate more CPU than its requests' limits together.

The isolate's per-request CPU figures (``CpuReport``, ``Response``, ``Done``) are claims: hostile
code writes its own frames onto the isolate's socket, as ``tests/security/test_protocol.py``
does, and takes SIGXCPU away from ember's handler. Here it spins forever while claiming, again
and again, that no request used any CPU. The supervisor's own bound (``cpushare.py``: the sum of
the limits of the requests in flight, then the interrupt grace) still stops it, as one request
past its limit was stopped before: the isolate is killed, neither request gets an answer of its
code, and the wall limit (five minutes) is never what ends them.
"""

from __future__ import annotations

from pathlib import Path

from ember.runtime.events import LifecycleEvent, RequestEvent
from tests.runtime.harness import Harness, write_project
from tests.runtime.test_cpu_per_request import _both

LIAR = """
import asyncio
import os
import signal
import stat
import time
from ember.runtime.protocol import CpuReport, encode
from workers import Response

spinning = asyncio.Event()
# Every request in flight, and more, used nothing: as of a clock reading far in the future.
FORGED = encode(CpuReport(1 << 52, [[rid, 0] for rid in range(1, 40)]))

def forge():
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, FORGED)
        except OSError:
            pass

async def fetch(request, env, ctx):
    if request.url.endswith("/liar"):
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        spinning.set()
        while True:
            end = time.thread_time() + 0.002
            while time.thread_time() < end:
                pass
            forge()
    await asyncio.wait_for(spinning.wait(), 20)
    await asyncio.sleep(30)
    return Response("waited")
"""


def test_forged_cpu_reports_do_not_lift_the_isolates_bound(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "liar", LIAR)
    deployment_id = harness.deploy(root, limits={"cpu_ms": 50})
    waiter, liar = _both(harness, deployment_id, "waiter", "liar")
    tags = {waiter.headers.get("x-ember-error"), liar.headers.get("x-ember-error")}
    # One of them is charged the CPU (the bound cannot tell which from what a liar says); the
    # other is told its isolate was restarted for it.
    assert tags == {"cpu_limit", "isolate_restarted"}, (waiter.text, liar.text)
    assert "did not stop at its CPU limit" in (waiter.text + liar.text)
    harness.wait_for(lambda: len(harness.of_type(RequestEvent, deployment_id)) == 2)
    lines = [e.message for e in harness.of_type(LifecycleEvent, deployment_id)]
    assert any("did not stop at its CPU limit" in line for line in lines), lines
