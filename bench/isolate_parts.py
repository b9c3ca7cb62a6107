"""The isolate's CPU per request, in-process: its connection, decoder, event runner and worker.

    PYTHONPATH=. python -m bench.isolate_parts [--rounds 30] [--batch 16]

Feeds batches of ``--batch`` encoded Request frames for ``examples/hello`` to a real
``IsolateConnection`` (its ``data_received`` called from a loop callback, as the loop does;
the writes go to a counting transport instead of a socket) and runs the loop until every
event is done. Rounds alternate between the isolate as it is ("armed": the frame writer's
flush armed after each read) and with ``FrameWriter.arm`` disabled (the flush then scheduled
by the first answer, one loop iteration later), in one process, so that a drift in the
machine's load cancels out in the per-round ratio. CPU is this process's ``process_time``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ember.runtime import loop as event_loop
from ember.runtime.isolate.events import EventRunner
from ember.runtime.isolate.main import ISOLATE_PATH, IsolateConnection, build_env, load_main
from ember.runtime.protocol import Request, encode

ROOT = Path(__file__).resolve().parents[1]
HEADERS = [("host", "127.0.0.1:8787"), ("user-agent", "ember-bench"), ("accept", "*/*")]
BATCHES_PER_ROUND = 100


class CountingTransport:
    """Stands in for the isolate's socket: counts the writes."""

    def __init__(self) -> None:
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


async def measure(rounds: int, batch: int) -> dict[str, Any]:
    if ISOLATE_PATH not in sys.path:
        sys.path.insert(0, ISOLATE_PATH)  # the `workers` module, as in an isolate
    connection = IsolateConnection(os.getpid())
    transport = CountingTransport()
    connection.transport = connection._writer.transport = transport  # type: ignore[assignment]
    spec = {"code_dir": str(ROOT / "examples" / "hello"), "main": "worker.py"}
    spec["vars"] = {"GREETING": "Hello"}
    env = build_env(spec, connection)
    connection.runner = runner = EventRunner(
        load_main(spec), env, connection.send, connection.mux, connection.channel
    )
    writer = connection._writer
    armed_arm = writer.arm
    loop = asyncio.get_running_loop()
    rid = 0
    results: dict[str, list[float]] = {"armed": [], "unarmed": []}
    writes: dict[str, int] = {"armed": 0, "unarmed": 0}
    for index in range(rounds + 1):  # the first round warms up
        order = ["armed", "unarmed"] if index % 2 == 0 else ["unarmed", "armed"]
        for mode in order:
            writer.arm = armed_arm if mode == "armed" else lambda: None  # type: ignore[method-assign]
            before_writes, started = transport.writes, time.process_time()
            for _ in range(BATCHES_PER_ROUND):
                data = b"".join(
                    encode(Request(rid + i + 1, "GET", "http://127.0.0.1:8787/", HEADERS, None, 0))
                    for i in range(batch)
                )
                rid += batch
                loop.call_soon(connection.data_received, data)
                await asyncio.sleep(0)
                while runner.events or writer._parts:
                    await asyncio.sleep(0)
            if index:
                used = time.process_time() - started
                results[mode].append(used / (BATCHES_PER_ROUND * batch) * 1e6)
                writes[mode] += transport.writes - before_writes
    ratio = statistics.median(
        a / u for a, u in zip(results["armed"], results["unarmed"], strict=True)
    )
    return {
        "cpu_us_per_request": {mode: statistics.median(v) for mode, v in results.items()},
        "armed_over_unarmed": ratio,
        "writes_per_batch": {mode: n / (rounds * BATCHES_PER_ROUND) for mode, n in writes.items()},
        "rounds": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16, help="Request frames per read")
    args = parser.parse_args()
    load_before = os.getloadavg()
    report = event_loop.run(measure(args.rounds, args.batch))
    report = {"load_before": load_before, "load_after": os.getloadavg(), **report}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
