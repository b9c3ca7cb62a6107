"""How a burst of streaming requests starts in the model server: direct and through a handler.

    PYTHONPATH=. python -m bench.ai_burst_probe [--streams 16] [--rounds 10]

One model server (``bench.ai``'s settings) and one ``ember dev`` whose worker streams
``env.AI.run`` back, both started with ``bench/probe`` on their PYTHONPATH: its sitecustomize
timestamps, in the model server only, each request's announcement (route entered), its
submission to the engine and every engine step with how many requests got their first token in
it. A bare asyncio client (``bench.ai_spread``'s) sends bursts of N streaming requests at once,
straight to the server and through the handler, alternating. Per burst: its TTFT p50, how long
the server took to announce all N, and the number of requests that got their first token in each
step, e.g. ``[16]`` (one prefill) or ``[1, 15]`` (a first request prefilled alone), the longest
pauses between announcements, and the server's garbage collections in the burst (count and ms
per generation). Over all rounds: the median of the per-round differences handler - direct, with
a 95% bootstrap interval. Writes ``bench/results/ai_burst_probe.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench import ai_spread
from bench.ai import MODEL, SERVER_ARGS, _stop, _wait_http, bench_project, checkpoint, request_body
from ember.models.pool.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "bench" / "probe"


def _start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{PROBE}:{ROOT}", "EMBER_PROBE_LOG": str(log)}
    return subprocess.Popen(
        [sys.executable, "-m", "ember", *command],
        cwd=ROOT,
        env={**env, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_handler(port: int, body: dict) -> None:
    for _ in range(300):
        try:
            if httpx.post(f"http://127.0.0.1:{port}/", json=body, timeout=60).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError("the handler never answered")


def _timeline(events: list[list[str]], start: float, end: float) -> dict:
    rows = [e for e in events if start <= float(e[1]) <= end]
    announced = [float(e[1]) for e in rows if e[0] == "expect"]
    first = min(announced)
    ordered = sorted(announced)
    gaps = [round((b - a) * 1e3, 2) for a, b in zip(ordered, ordered[1:], strict=False)]
    return {
        "announced_over_ms": round((max(announced) - first) * 1e3, 1),
        # The longest pauses between consecutive announcements: where a burst's arrival stalls.
        "largest_announce_gaps_ms": sorted(gaps, reverse=True)[:3],
        # The model server's garbage collections during the burst: count and ms, per generation.
        "gc": {
            str(generation): [
                sum(1 for e in rows if e[0] == "gc" and e[3] == str(generation)),
                round(
                    sum(
                        float(e[2]) - float(e[1])
                        for e in rows
                        if e[0] == "gc" and e[3] == str(generation)
                    )
                    * 1e3,
                    1,
                ),
            ]
            for generation in range(3)
        },
        "first_token_steps": [int(e[6]) for e in rows if e[0] == "step" and int(e[6]) > 0],
        "first_prefill_starts_ms": next(
            (round((float(e[1]) - first) * 1e3, 1) for e in rows if e[0] == "step"), None
        ),
    }


def _median_interval(values: list[float], resamples: int = 2000) -> tuple[float, float]:
    """A 95% bootstrap interval for the median of ``values`` (the per-round differences); the
    resampling is seeded, so the same rounds give the same interval."""
    rng = random.Random(0)
    medians = sorted(
        statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples)
    )
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/ai_burst_probe.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        log = work / "probe.log"
        server_port, dev_port = free_port(), free_port()
        server = _start(
            ["models", "serve", str(checkpoint(work)), "--port", str(server_port)]
            + ["--served-model-name", MODEL, *SERVER_ARGS, "--max-running-requests", "128"],
            log,
        )
        (work / "dev").mkdir()
        project = bench_project(work / "dev", server_port)
        dev = _start(["dev", str(project), "--port", str(dev_port), "--no-watch"], log)
        body = request_body(32)
        bursts = []
        try:
            _wait_http(f"http://127.0.0.1:{server_port}/health")
            _wait_handler(dev_port, body)
            direct_body = {**body, "model": MODEL, "stream_options": {"include_usage": True}}
            chat = ai_spread._http(server_port, "/v1/chat/completions", direct_body)
            targets = {
                "direct": (server_port, chat),
                "handler": (dev_port, ai_spread._http(dev_port, "/", body)),
            }
            for port, request in [*targets.values()] * 3:  # warm
                asyncio.run(ai_spread._burst(port, request, args.streams, 0.0))
            for index in range(args.rounds):
                for path in ("direct", "handler") if index % 2 == 0 else ("handler", "direct"):
                    time.sleep(0.3)
                    port, request = targets[path]
                    start = time.monotonic()
                    result = asyncio.run(ai_spread._burst(port, request, args.streams, 0.0))
                    bursts.append((path, index, start, time.monotonic(), result["ttft_p50_ms"]))
        finally:
            _stop(dev)
            _stop(server)
        events = [line.split() for line in log.read_text().splitlines()]
    rows = [
        {"path": path, "round": index, "ttft_p50_ms": ttft, **_timeline(events, start, end)}
        for path, index, start, end, ttft in bursts
    ]
    ttft = {p: [r["ttft_p50_ms"] for r in rows if r["path"] == p] for p in ("direct", "handler")}
    added = [h - d for h, d in zip(ttft["handler"], ttft["direct"], strict=True)]
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "streams": args.streams,
        "rounds": args.rounds,
        "median_ttft_p50_ms": {p: statistics.median(v) for p, v in ttft.items()},
        "handler_minus_direct_median_of_rounds_ms": round(statistics.median(added), 2),
        "handler_minus_direct_median_95ci_ms": [round(v, 2) for v in _median_interval(added)],
        "bursts_in_one_prefill": {
            p: sum(1 for r in rows if r["path"] == p and len(r["first_token_steps"]) == 1)
            for p in ("direct", "handler")
        },
        "bursts": rows,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "bursts"}, indent=1))


if __name__ == "__main__":
    main()
