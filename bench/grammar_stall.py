"""Does a new schema stall everybody's decoding? The inter-token latency of plain streams while a
client keeps sending distinct 1000-value-enum JSON schemas, on this checkout's model server and
on ``--baseline``'s (a checkout from before grammars were built off the engine thread), one
server each, their phases alternating round by round so both run under the same load.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.grammar_stall --baseline <dir> --baseline-commit <commit>

A phase: ``--streams`` streamed completions of ``--tokens`` tokens each (``ignore_eos``, greedy)
run to the end, while ``--senders`` clients each send, one after the other, completions
constrained to a schema never seen before (an ``enum`` of 1000 strings, ~22 kB: the largest
enum ember accepts is 1000 values), 4 tokens each. A ``quiet`` phase (the streams alone) per side
gives the floor. Per phase: the gaps between a stream's consecutive chunks (ITL) over every
stream, p50 / p99 / max, and the enum requests answered. Writes
``bench/results/grammar_stall.json``: the phases, and per side and kind the medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai import _stop, _wait_http, checkpoint  # noqa: E402
from bench.ai_load import checkout_commit, load_average  # noqa: E402
from ember.models.pool.launch import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ENUM_VALUES = 1000


class Server:
    """One checkout's ``ember models serve`` on the shared checkpoint."""

    def __init__(self, name: str, code: Path, ckpt: Path, args: argparse.Namespace) -> None:
        self.name = name
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ember", "models", "serve", str(ckpt), "--port", str(port)]
            + ["--served-model-name", "glm", "--torch-threads", str(args.torch_threads)]
            + ["--kv-cache-bytes", "256MiB", "--max-running-requests", "64"],
            cwd=code,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        _stop(self.process)


_tags = itertools.count()


def enum_schema() -> dict:
    """A schema no request sent before: 1000 distinct 18-character strings."""
    tag = next(_tags)
    return {"enum": [f"s{tag:06d}-v{i:04d}-abcdef" for i in range(ENUM_VALUES)]}


async def _stream(client: httpx.AsyncClient, tokens: int, seed: int) -> list[float]:
    """One plain streamed completion; the gaps between its chunks, in ms."""
    body = {
        "prompt": f"def f{seed}(",
        "max_tokens": tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
    }
    arrivals: list[float] = []
    async with client.stream("POST", "/v1/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                arrivals.append(time.perf_counter())
    return [(b - a) * 1e3 for a, b in itertools.pairwise(arrivals)]


async def _sender(
    client: httpx.AsyncClient, stop: asyncio.Event, done: list[float], same: bool
) -> None:
    fixed = enum_schema()  # --same-schema: every request sends this one, as a client of
    while not stop.is_set():  # structured output does; else each a schema never seen before
        body = {
            "prompt": "colour: ",
            "max_tokens": 4,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "e", "schema": fixed if same else enum_schema()},
            },
        }
        started = time.perf_counter()
        response = await client.post("/v1/completions", json=body)
        response.raise_for_status()
        done.append((time.perf_counter() - started) * 1e3)


async def phase(url: str, args: argparse.Namespace, senders: int) -> dict:
    limits = httpx.Limits(max_connections=args.streams + senders + 4)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        stop, answered = asyncio.Event(), []
        flood = [
            asyncio.create_task(_sender(client, stop, answered, args.same_schema))
            for _ in range(senders)
        ]
        if senders:
            await asyncio.sleep(0.2)  # the schemas are flowing before the streams start
        gaps = await asyncio.gather(*(_stream(client, args.tokens, i) for i in range(args.streams)))
        stop.set()
        await asyncio.gather(*flood)
    itl = sorted(g for stream in gaps for g in stream)
    return {
        "itl_p50_ms": round(statistics.median(itl), 2),
        "itl_p99_ms": round(itl[int(0.99 * (len(itl) - 1))], 2),
        "itl_max_ms": round(itl[-1], 2),
        "enum_requests": len(answered),
        "enum_latency_p50_ms": round(statistics.median(answered), 1) if answered else None,
    }


def summary(phases: list[dict]) -> list[dict]:
    out = []
    for side, kind in itertools.product(("baseline", "this"), ("quiet", "enum")):
        rows = [p for p in phases if p["side"] == side and p["kind"] == kind]
        if not rows:
            continue
        row: dict = {"side": side, "kind": kind, "rounds": len(rows)}
        for key in ("itl_p50_ms", "itl_p99_ms", "itl_max_ms", "enum_requests"):
            row[key] = round(statistics.median(r[key] for r in rows), 2)
        out.append(row)
    return out


def rotate_rounds(
    servers: list[Server],
    kinds: tuple[str, str],
    args: argparse.Namespace,
    run_phase: Callable[[str, argparse.Namespace, int], Awaitable[dict]],
    phases: list[dict],
    loads: list[list[float]],
) -> None:
    """``args.rounds`` rounds of every (server, kind) phase, the order rotated by one each round
    so that no side always runs first; ``kinds[0]`` runs ``args.senders`` senders, ``kinds[1]``
    none (the quiet floor). Appends each phase to ``phases`` and each round's load to ``loads``."""
    runs = [(s, k) for s in servers for k in kinds]
    for index in range(args.rounds):
        shift = index % len(runs)
        for server, kind in runs[shift:] + runs[:shift]:
            senders = args.senders if kind == kinds[0] else 0
            result = asyncio.run(run_phase(server.url, args, senders))
            phases.append({"side": server.name, "kind": kind, "round": index, **result})
            print(f"  {server.name:<8} {kind:<6} {result}", flush=True)
        loads.append(load_average())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--baseline-commit", help="recorded for a baseline that is no git checkout")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--senders", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument(
        "--same-schema",
        action="store_true",
        help="the senders repeat one schema (a structured-output client) instead of new ones",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "grammar_stall.json")
    args = parser.parse_args()
    phases: list[dict] = []
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as scratch:
        ckpt = checkpoint(Path(scratch))
        servers = [
            Server("baseline", args.baseline.resolve(), ckpt, args),
            Server("this", ROOT, ckpt, args),
        ]
        try:
            for server in servers:
                _wait_http(server.url + "/health")
                asyncio.run(phase(server.url, argparse.Namespace(**{**vars(args), "tokens": 8}), 1))
            rotate_rounds(servers, ("enum", "quiet"), args, phase, phases, loads)
        finally:
            for server in servers:
                server.stop()
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "baseline_commit": args.baseline_commit or checkout_commit(args.baseline),
        "this_commit": checkout_commit(ROOT),
        "settings": {
            k: v for k, v in vars(args).items() if k not in ("baseline", "baseline_commit", "out")
        },
        "cpus": os.cpu_count(),
        "load_average_per_round": loads,
        "phases": phases,
        "summary": summary(phases),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for row in data["summary"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
