"""Two finer views of the handler path than ``bench/ai.py``'s phase medians.

    PYTHONPATH=. python -m bench.ai_paired [--pairs 40] [--rounds 3] [--streams 16,64]

1. **paired TTFT at 1 stream**: one request at a time, alternating model server / REST / handler
   (order flipped each time), so each handler and REST request has a model-server request
   next to it under the same load; the figure is the median of the per-pair differences. On a
   box whose load swings between phases, this is steadier than comparing phase medians.
2. **CPU split per process** of ``ember dev`` (supervisor; isolate) per 1,000 streamed tokens,
   REST vs handler, at each of ``--streams`` concurrent streams, from /proc around each phase:
   where the handler path's cost is, and what the isolate itself still costs.

Same servers, worker and requests as ``bench/ai.py`` (the tiny GLM-4.7 checkpoint, one torch
thread, 32 completion tokens for the CPU split, 4 for TTFT). Writes
``bench/results/ai_paired.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench import ai as base
from bench.ai_load import load_average, run_phase, timed_stream
from ember.models.pool.launch import free_port

OUT = base.RESULTS / "ai_paired.json"
_TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the zygote and the isolate of ``ember dev``)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent:
                found.append(child)
                frontier.append(child)
    return found


def _cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _servers(work: Path) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], int, int]:
    ckpt = base.checkpoint(work)
    server_port, dev_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ember", "models", "serve", str(ckpt), "--port", str(server_port)]
        + ["--served-model-name", base.MODEL, *base.SERVER_ARGS, "--max-running-requests", "128"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=base._env(),
    )
    project = base.bench_project(work, server_port)
    return server, base._start_dev(project, dev_port), server_port, dev_port


def _targets(server_port: int, dev_port: int, max_tokens: int) -> dict[str, tuple[str, dict]]:
    body = base.request_body(max_tokens)
    direct = {**body, "model": base.MODEL, "stream_options": {"include_usage": True}}
    return {
        "direct": (f"http://127.0.0.1:{server_port}/v1/chat/completions", direct),
        "rest": (f"http://127.0.0.1:{dev_port}/client/v4/accounts/local/ai/run/{base.MODEL}", body),
        "runtime": (f"http://127.0.0.1:{dev_port}/", body),
    }


async def _paired_ttft(targets: dict[str, tuple[str, dict]], pairs: int) -> dict:
    ttft: dict[str, list[float]] = {path: [] for path in targets}
    async with httpx.AsyncClient(timeout=120) as client:
        for url, body in targets.values():  # warm: connections, the isolate, the pool
            for _ in range(3):
                await timed_stream(client, url, body)
        for index in range(pairs):
            order = list(targets) if index % 2 else list(reversed(targets))
            for path in order:
                url, body = targets[path]
                ttft[path].append((await timed_stream(client, url, body)).ttft * 1000)
    result: dict = {"pairs": pairs}
    for path, values in ttft.items():
        result[f"{path}_ttft_p50_ms"] = round(statistics.median(values), 3)
    for path in ("rest", "runtime"):
        added = [a - b for a, b in zip(ttft[path], ttft["direct"], strict=True)]
        result[f"{path}_ttft_added_p50_ms"] = round(statistics.median(added), 3)
    return result


def _cpu_split(targets: dict, dev_pid: int, streams: int, rounds: int) -> list[dict]:
    rows = []
    per_worker = max(1, 128 // streams)
    for round_index in range(rounds):
        order = ["runtime", "rest"] if round_index % 2 else ["rest", "runtime"]
        for path in order:
            url, body = targets[path]
            children = _children(dev_pid)
            before = (_cpu(dev_pid), sum(_cpu(pid) for pid in children))
            phase = asyncio.run(run_phase(url, body, streams, per_worker))
            after = (_cpu(dev_pid), sum(_cpu(pid) for pid in children))
            tokens = sum(t.tokens for t in phase.timings) or 1
            row = {
                "path": path,
                "round": round_index,
                "streams": streams,
                "tokens": tokens,
                "tokens_per_s": round(phase.tokens_per_s, 2),
                "supervisor_cpu_ms_per_1k": round((after[0] - before[0]) / tokens * 1e6, 1),
                "isolate_cpu_ms_per_1k": round((after[1] - before[1]) / tokens * 1e6, 1),
            }
            print(f"  {row}", flush=True)
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--streams", type=lambda s: [int(v) for v in s.split(",")], default=[16, 64]
    )
    args = parser.parse_args()
    data: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    with tempfile.TemporaryDirectory() as scratch:
        server, dev, server_port, dev_port = _servers(Path(scratch))
        try:
            base._wait_http(f"http://127.0.0.1:{server_port}/health")
            data["load_average_before"] = load_average()
            data["ttft"] = asyncio.run(_paired_ttft(_targets(server_port, dev_port, 4), args.pairs))
            print(f"ttft: {data['ttft']}", flush=True)
            targets = _targets(server_port, dev_port, 32)
            data["cpu_split"] = [
                row
                for streams in args.streams
                for row in _cpu_split(targets, dev.pid, streams, args.rounds)
            ]
            data["load_average_after"] = load_average()
        finally:
            base._stop(dev)
            base._stop(server)
    data["cpu_split_medians"] = {
        f"{path}@{streams}": {
            key: statistics.median(
                r[key] for r in data["cpu_split"] if (r["path"], r["streams"]) == (path, streams)
            )
            for key in ("supervisor_cpu_ms_per_1k", "isolate_cpu_ms_per_1k", "tokens_per_s")
        }
        for streams in args.streams
        for path in ("rest", "runtime")
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "cpu_split"}, indent=2))


if __name__ == "__main__":
    main()
