"""Where ember's per-request CPU goes, without HTTP: the supervisor's own code and the isolate.

    PYTHONPATH=. python -m bench.runtime_parts [--requests 3000] [--rounds 5] [--general]

On another version of ember (its package first on sys.path, this checkout's bench and example):

    git archive REV ember | tar -x -C /tmp/old && cd /tmp/old && PYTHONPATH=$OLDPWD \
        python -m bench.runtime_parts

Drives ``examples/hello`` through the real ``Router`` (its ASGI interface called directly: no
uvicorn, no client sockets), the real supervisor and a real isolate forked from the zygote, with
16 requests in flight, and the dev terminal sink writing to /dev/null. Reports, per request, the
CPU of this process (router + supervisor + isolate bookkeeping + frame codec + the isolate
socket's syscalls + request logging: what ``ember dev`` adds to uvicorn) and the isolate's CPU.
``bench/runtime.py`` measures the whole servers; this isolates ember's share of the supervisor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ember.cli.dev import TerminalSink
from ember.runtime.deployment import load_deployment
from ember.runtime.router import Router
from ember.runtime.supervisor import Supervisor

try:
    from ember.runtime.loop import loop_factory, run
except ImportError:  # a version before ember picked its loop: asyncio's, as ember dev did

    def loop_factory() -> Any:  # type: ignore[misc]
        return asyncio.new_event_loop

    run = asyncio.run  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 16
SCOPE = {
    "type": "http",
    "method": "GET",
    "path": "/",
    "raw_path": b"/",
    "query_string": b"",
    "scheme": "http",
    "server": ("127.0.0.1", 8787),
    "headers": [(b"host", b"127.0.0.1:8787"), (b"user-agent", b"ember-bench")],
}


async def measure(requests: int, rounds: int, general: bool) -> dict[str, list[float]]:
    """Per-round CPU microseconds per request: this process ("supervisor") and the isolate.

    ``general``: every round twice, in ABBA order, the second time with the router's fast path
    off (``Supervisor.fetch_ready`` declining, so every request takes ``Supervisor.fetch``).
    """
    supervisor = Supervisor(state_dir=Path(tempfile.mkdtemp()), events=TerminalSink(), dev=True)
    ready = getattr(supervisor, "fetch_ready", None)
    await supervisor.start()
    deployment = load_deployment(ROOT / "examples" / "hello")
    await supervisor.deploy(deployment)
    router = Router(supervisor, lambda scope: deployment.id)
    bodies: list[bytes] = []

    async def receive() -> dict[str, Any]:
        # As uvicorn does: nothing more after the (empty) body until the response is complete.
        await asyncio.get_running_loop().create_future()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    async def client(count: int) -> None:
        for _ in range(count):
            await router(dict(SCOPE), receive, send)

    results: dict[str, list[float]] = {"supervisor_us": [], "isolate_us": []}
    if general:
        results |= {"supervisor_us_general": [], "isolate_us_general": []}
    try:
        for index in range(rounds + 1):  # the first round warms up
            order = ["", "_general"] if general else [""]
            for path in order if index % 2 == 0 else order[::-1]:
                if ready is not None:  # (an older ember has no fast path to turn off)
                    off = lambda *_: None  # noqa: E731
                    supervisor.fetch_ready = off if path else ready  # type: ignore[method-assign]
                process = supervisor.isolate(deployment.id)
                assert process is not None  # invariant: deployed eagerly above
                isolate_before, own_before = process.cpu(), time.thread_time()
                await asyncio.gather(*(client(requests // CONCURRENCY) for _ in range(CONCURRENCY)))
                done = requests // CONCURRENCY * CONCURRENCY
                results["supervisor_us" + path].append(
                    (time.thread_time() - own_before) / done * 1e6
                )
                results["isolate_us" + path].append((process.cpu() - isolate_before) / done * 1e6)
                assert set(bodies) == {b"Hello, world!"}, set(bodies)
                bodies.clear()
    finally:
        await supervisor.close()
    return {name: values[1:] for name, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--general", action="store_true", help="also each round without the router's fast path"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    stdout, sys.stdout = sys.stdout, open(os.devnull, "w")  # the sink's request lines
    try:
        results = run(measure(args.requests, args.rounds, args.general))
    finally:
        sys.stdout.close()
        sys.stdout = stdout
    report = {
        "loop": loop_factory().__module__.split(".")[0],
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rounds": results,
        "median": {name: statistics.median(values) for name, values in results.items()},
    }
    if args.general:  # paired by round: a drift in the machine's load cancels out
        pairs = zip(results["supervisor_us"], results["supervisor_us_general"], strict=True)
        report["supervisor_fast_over_general"] = statistics.median(f / g for f, g in pairs)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
