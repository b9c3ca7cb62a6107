"""Does an account with many busy isolates crowd out another account's one? A victim worker's
throughput on ``ember serve`` while another account keeps ``--flood-workers`` workers (one
isolate each) busy with CPU-bound requests, on this checkout's platform and on ``--baseline``'s
(a checkout from before each account's isolates shared one cpu cgroup), their phases alternating
round by round under the same load.

    git archive <commit> | tar -x -C <dir>
    sudo PYTHONPATH=. python -m bench.account_cpu --baseline <dir> --baseline-commit <commit>

Needs the sandbox's cgroup layer (root, cgroup v1): without it both sides run their isolates
ungrouped and measure the same thing. Every worker's request spins ``--spin-ms`` of CPU and
answers. A phase runs ``--seconds``: one keep-alive connection sends the victim's worker
requests one after the other; in ``flood`` phases one more connection per flood worker does
the same to it (``quiet``: the victim alone). Per phase: the victim's and the flood's requests/s
and the victim's share of the work done (its requests over all requests: each costs the same
CPU), their total, and the victim's p50 / p99 latency. On a shared machine the total also
moves with what else runs: grouped, all of the platform's isolates weigh two cgroups against
the other processes' one share each, ungrouped one share per isolate.
Writes ``bench/results/account_cpu.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.platform_ab import ServePlatform, ab_arguments, keepalive_client, run_ab  # noqa: E402

RESULTS = ROOT / "bench" / "results"
SPINNER = """\
import time
from workers import Response


async def on_fetch(request, env):
    end = time.thread_time() + {seconds}
    while time.thread_time() < end:
        pass
    return Response("spun")
"""
KINDS = ("quiet", "flood")
METRICS = (
    "victim_requests_per_s",
    "flood_requests_per_s",
    "victim_share",
    "total_requests_per_s",
    "victim_p50_ms",
    "victim_p99_ms",
)


class Platform(ServePlatform):
    """One checkout's ``ember serve`` with the victim's worker and the flooder's."""

    def __init__(self, name: str, code: Path, scratch: Path, args: argparse.Namespace) -> None:
        super().__init__(name, code, scratch)
        source = SPINNER.format(seconds=args.spin_ms / 1000)
        self.deploy("victim", {"spin": source})
        self.flood_hosts = [f"spin{i}.flood.localhost" for i in range(args.flood_workers)]
        self.deploy("flood", {f"spin{i}": source for i in range(args.flood_workers)})


async def phase(platform: Platform, kind: str, args: argparse.Namespace) -> dict:
    stop = asyncio.Event()
    latencies: list[float] = []
    flooders = []
    if kind == "flood":
        flooders = [
            asyncio.create_task(keepalive_client(platform.port, host, "/", stop))
            for host in platform.flood_hosts
        ]
        await asyncio.sleep(0.5)  # the flood is under way before the victim is measured
    started = time.perf_counter()
    victim = asyncio.create_task(
        keepalive_client(platform.port, "spin.victim.localhost", "/", stop, latencies)
    )
    await asyncio.sleep(args.seconds)
    stop.set()
    await victim
    elapsed = time.perf_counter() - started
    flood_done = sum(await asyncio.gather(*flooders))
    flood_elapsed = elapsed + (0.5 if flooders else 0.0)
    latencies.sort()
    victim_rate = len(latencies) / elapsed
    flood_rate = flood_done / flood_elapsed
    return {
        "side": platform.name,
        "kind": kind,
        "victim_requests_per_s": round(victim_rate, 1),
        "flood_requests_per_s": round(flood_rate, 1),
        "victim_share": round(victim_rate / (victim_rate + flood_rate), 3),
        "total_requests_per_s": round(victim_rate + flood_rate, 1),
        "victim_p50_ms": round(statistics.median(latencies), 2),
        "victim_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 2),
        "loadavg": os.getloadavg()[0],
    }


def main() -> None:
    parser = ab_arguments(__doc__, RESULTS / "account_cpu.json", seconds=6.0)
    parser.add_argument("--flood-workers", type=int, default=4)
    parser.add_argument("--spin-ms", type=float, default=20.0, help="CPU per request")
    run_ab("bench.account_cpu", parser.parse_args(), Platform, KINDS, METRICS, phase)


if __name__ == "__main__":
    main()
