"""Code A/B of the AI path on a shared box: two checkouts' model servers and ``ember dev``s up at
once, their phases interleaved round by round, so both sides run under the same load.

    PYTHONPATH=. python -m bench.ai_ab --baseline ../main-checkout [--rounds 8]

Each side is one model server (``ember models serve``, as in ``bench/ai.py``) and one ``ember
dev`` whose worker streams ``env.AI.run`` straight back, both started from that side's checkout
(``cwd`` and ``PYTHONPATH``: ``python -m`` puts the working directory first on the path). Per
round and concurrency the four phases (baseline direct / handler, this checkout's direct /
handler) run back to back in an order that rotates each round. The same requests as
``bench.ai``'s overhead section (32 completion tokens, ``ignore_eos``, two per stream: a burst,
then closed-loop follow-ups). Reported per side: medians over rounds of the TTFT (p50, burst
wave, follow-ups), tokens/s, and the handler's TTFT added and throughput cost against the same
side's direct phase in the same round. Writes ``bench/results/ai_ab.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai import (  # noqa: E402
    MODEL,
    SERVER_ARGS,
    _median,
    _stop,
    _wait_http,
    bench_project,
    checkpoint,
    request_body,
)
from bench.ai_load import checkout_commit, load_average, run_phase  # noqa: E402
from ember.models.pool.launch import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


class Side:
    """One checkout's model server and ``ember dev``."""

    def __init__(self, name: str, code: Path, ckpt: Path, work: Path) -> None:
        self.name = name
        server_port, dev_port = free_port(), free_port()
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        self.server = subprocess.Popen(
            [sys.executable, "-m", "ember", "models", "serve", str(ckpt)]
            + ["--port", str(server_port), "--served-model-name", MODEL, *SERVER_ARGS]
            + ["--max-running-requests", "128"],
            cwd=code,
            env=_env(code),
            **quiet,
        )
        work.mkdir()
        project = bench_project(work, server_port)
        self.dev = subprocess.Popen(
            [sys.executable, "-m", "ember", "dev", str(project), "--port", str(dev_port)]
            + ["--no-watch"],
            cwd=code,
            env=_env(code),
            **quiet,
        )
        self.health = f"http://127.0.0.1:{server_port}/health"
        self.direct = f"http://127.0.0.1:{server_port}/v1/chat/completions"
        self.handler = f"http://127.0.0.1:{dev_port}/"

    def stop(self) -> None:
        _stop(self.dev)
        _stop(self.server)


def _summary(phases: list[dict], concurrency: int) -> dict:
    out: dict = {"concurrency": concurrency}
    for side in sorted({p["side"] for p in phases}):
        mine = [p for p in phases if p["side"] == side and p["concurrency"] == concurrency]
        for path in ("direct", "handler"):
            rows = [p for p in mine if p["path"] == path]
            for key in ("ttft_p50_ms", "ttft_burst_p50_ms", "ttft_steady_p50_ms", "tokens_per_s"):
                values = [r[key] for r in rows if r.get(key) is not None]
                if values:
                    out[f"{side}_{path}_{key}"] = round(_median(values), 2)
        added: dict[str, list[float]] = {"": [], "_burst": [], "_steady": []}
        ratios = []
        for index in sorted({p["round"] for p in mine}):
            pair = {p["path"]: p for p in mine if p["round"] == index}
            if len(pair) < 2:
                continue
            ratios.append(pair["handler"]["tokens_per_s"] / pair["direct"]["tokens_per_s"])
            for kind, values in added.items():
                mine_ttft = pair["handler"].get(f"ttft{kind}_p50_ms")
                direct_ttft = pair["direct"].get(f"ttft{kind}_p50_ms")
                if mine_ttft is not None and direct_ttft is not None:
                    values.append(mine_ttft - direct_ttft)
        if ratios:
            out[f"{side}_handler_throughput_cost_pct"] = round(100 * (1 - _median(ratios)), 2)
        for kind, values in added.items():
            if values:
                out[f"{side}_handler_ttft_added{kind}_ms"] = round(_median(values), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--concurrency", type=lambda s: [int(v) for v in s.split(",")], default=[16, 64]
    )
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw")
    parser.add_argument("--out", type=Path, default=RESULTS / "ai_ab.json")
    args = parser.parse_args()
    body = request_body(args.max_tokens)
    direct_body = {**body, "model": MODEL, "stream_options": {"include_usage": True}}
    phases: list[dict] = []
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as scratch:
        ckpt = checkpoint(Path(scratch))
        sides = [
            Side("baseline", args.baseline.resolve(), ckpt, Path(scratch) / "baseline"),
            Side("this", ROOT, ckpt, Path(scratch) / "this"),
        ]
        try:
            for side in sides:
                _wait_http(side.health)
            for side in sides:  # warm: isolate, pool, connections
                asyncio.run(run_phase(side.handler, body, 2, 2))
                asyncio.run(run_phase(side.direct, direct_body, 2, 2))
            order = [(s, p) for s in sides for p in ("direct", "handler")]
            for round_index in range(args.rounds):
                for concurrency in args.concurrency:
                    shift = round_index % len(order)
                    for side, path in order[shift:] + order[:shift]:
                        url, payload = (
                            (side.direct, direct_body) if path == "direct" else (side.handler, body)
                        )
                        phase = asyncio.run(
                            run_phase(url, payload, concurrency, 2, client=args.client)
                        )
                        row = {"side": side.name, "path": path, "round": round_index}
                        phases.append({**row, **phase.summary()})
                        print(f"  {side.name:<8} {path:<7} {phases[-1]}", flush=True)
                loads.append(load_average())
        finally:
            for side in sides:
                side.stop()
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "baseline_commit": checkout_commit(args.baseline),
        "this_commit": checkout_commit(ROOT),
        "settings": {"rounds": args.rounds, "max_tokens": args.max_tokens, "client": args.client},
        "load_average_per_round": loads,
        "phases": phases,
        "compare": [_summary(phases, c) for c in args.concurrency],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for row in data["compare"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
