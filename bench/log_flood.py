"""Does one tenant's print flood slow everybody down? A victim worker's latency on ``ember serve``
while another account's worker prints 100-character lines to stderr in a loop, on this
checkout's platform and on ``--baseline``'s (a checkout from before isolate output had a
budget), one platform each, their phases alternating round by round under the same load.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.log_flood --baseline <dir> --baseline-commit <commit>

Each platform serves two permanent accounts: ``victim`` (a worker answering a short text) and
``flood`` (``printer``: each request prints ``--lines`` lines of ``--line-bytes`` to stderr and
answers; ``noop``: answers at once). A phase runs ``--seconds``: ``--victim-connections``
keep-alive connections send the victim's worker requests one after the other, and one more
connection floods: ``quiet`` (none), ``print`` (requests to ``printer``), ``noop`` (requests to
``noop``: the same request flood without output, to tell the output's cost from the requests').
Per phase: the victim's requests/s and p50 / p99 latency, the flood's requests, and the CPU the
platform's own process (the supervisor: router, isolate frames, logs) used, in % of one core.
Writes ``bench/results/log_flood.json``: the phases, and per side and kind the medians.
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
VICTIM = """\
from workers import Response


async def on_fetch(request, env):
    return Response("hello")
"""
PRINTER = """\
import sys
from workers import Response

LINE = "x" * {width}


async def on_fetch(request, env):
    for _ in range({lines}):
        print(LINE, file=sys.stderr)
    return Response("printed")
"""
NOOP = VICTIM.replace("hello", "noop")
KINDS = ("quiet", "print", "noop")
METRICS = (
    "victim_requests_per_s",
    "victim_p50_ms",
    "victim_p99_ms",
    "flood_requests",
    "supervisor_cpu_percent",
)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Platform(ServePlatform):
    """One checkout's ``ember serve`` with the victim's and the flooder's workers."""

    def __init__(self, name: str, code: Path, scratch: Path, args: argparse.Namespace) -> None:
        super().__init__(name, code, scratch)
        printer = PRINTER.format(width=args.line_bytes - 1, lines=args.lines)
        self.deploy("victim", {"hello": VICTIM})
        self.deploy("flood", {"printer": printer, "noop": NOOP})


async def phase(platform: Platform, kind: str, args: argparse.Namespace) -> dict:
    stop = asyncio.Event()
    latencies: list[float] = []
    flood = {"print": "printer", "noop": "noop"}.get(kind)
    flooder = (
        asyncio.create_task(keepalive_client(platform.port, f"{flood}.flood.localhost", "/", stop))
        if flood
        else None
    )
    if flooder is not None:
        await asyncio.sleep(0.5)  # the flood is under way before the victim is measured
    cpu = cpu_seconds(platform.process.pid)
    started = time.perf_counter()
    victims = [
        asyncio.create_task(
            keepalive_client(platform.port, "hello.victim.localhost", "/", stop, latencies)
        )
        for _ in range(args.victim_connections)
    ]
    await asyncio.sleep(args.seconds)
    stop.set()
    await asyncio.gather(*victims)
    elapsed = time.perf_counter() - started
    supervisor = (cpu_seconds(platform.process.pid) - cpu) / elapsed * 100
    flooded = await flooder if flooder is not None else 0
    latencies.sort()
    return {
        "side": platform.name,
        "kind": kind,
        "victim_requests_per_s": round(len(latencies) / elapsed, 1),
        "victim_p50_ms": round(statistics.median(latencies), 2),
        "victim_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 2),
        "flood_requests": flooded,
        "supervisor_cpu_percent": round(supervisor, 1),
        "loadavg": os.getloadavg()[0],
    }


def main() -> None:
    parser = ab_arguments(__doc__, RESULTS / "log_flood.json", seconds=8.0)
    parser.add_argument("--victim-connections", type=int, default=2)
    parser.add_argument("--lines", type=int, default=2000, help="lines per flood request")
    parser.add_argument("--line-bytes", type=int, default=100, help="each line, its newline too")
    run_ab("bench.log_flood", parser.parse_args(), Platform, KINDS, METRICS, phase)


if __name__ == "__main__":
    main()
