"""Where a decode step's time goes: the engine (as the model server runs it) decoding a batch of
held-out prompts, one step profiled with ``torch.profiler`` (operator self CPU time) and the
Python time attributed by module (cProfile), for each KV dtype and integrity mode asked.

    PYTHONPATH=. python bench/profile_decode.py --arch kimi --batch 1 64 --kv bf16 fp8_e4m3

Prints the tables; ``--out`` writes them as JSON (default ``bench/results/profile_decode.json``).
"""
# ruff: noqa: E402  (bench/ must move behind the standard library before other imports)

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [p for p in sys.path if p and str(Path(p).resolve()) != _HERE] + [_HERE]

import torch
from serving import ARCHS, REPO, checkpoint, load_average, prompts_for
from torch.profiler import ProfilerActivity, profile

from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.spec import kv_layout_for
from ember.models.loader import load_model

STEPS = 8


def decoding_engine(model, config, prompts, kv: str, integrity: str) -> LLMEngine:
    engine = LLMEngine(
        model,
        kv_layout_for(config),
        EngineConfig(
            kv_cache_bytes=64 * 2**20,
            kv_cache_dtype=kv,
            integrity=integrity,
            max_num_seqs=len(prompts),
            max_num_batched_tokens=max(1024, len(prompts)),
        ),
        model_dtype="bf16",
    )
    for i, prompt in enumerate(prompts):
        engine.add_request(str(i), prompt, StopCriteria(max_tokens=200, ignore_eos=True))
    while engine.scheduler.waiting or any(
        s.num_uncomputed_tokens > 1 for s in engine.scheduler.running
    ):
        engine.step()
    for _ in range(3):  # warm
        engine.step()
    return engine


def by_module(stats: pstats.Stats, total: float) -> dict[str, float]:
    """Cumulative share of the step per ember module (functions in it, outermost call only)."""
    shares: Counter[str] = Counter()
    for (file, _line, _name), (_cc, _nc, _tt, cumulative, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "/ember/" not in file:
            continue
        module = file.split("/ember/", 1)[1]
        if any(f"/ember/{module}" in caller[0] for caller in callers):
            continue  # called from the same module: counted at the outer call
        shares[module] += cumulative
    return {m: round(t / total, 3) for m, t in shares.most_common(12)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="kimi", choices=ARCHS)
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--kv", nargs="+", default=["bf16", "fp8_e4m3"])
    parser.add_argument("--integrity", nargs="+", default=["off"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "profile_decode.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    directory, trained = checkpoint(ARCHS[args.arch], Path(tempfile.mkdtemp()))
    loaded = load_model(directory, dtype=torch.bfloat16)
    results = {"arch": args.arch, "trained": trained, "load": load_average(), "rows": []}
    for batch in args.batch:
        prompts = prompts_for(directory, batch, 128)
        for kv in args.kv:
            for integrity in args.integrity:
                engine = decoding_engine(loaded.model, loaded.config, prompts, kv, integrity)
                start = time.perf_counter()
                cpu = time.thread_time()
                for _ in range(STEPS):
                    engine.step()
                wall = (time.perf_counter() - start) / STEPS
                cpu = (time.thread_time() - cpu) / STEPS
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    for _ in range(STEPS):
                        engine.step()
                ops = prof.key_averages()
                total = sum(e.self_cpu_time_total for e in ops)
                top = sorted(ops, key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
                profiler = cProfile.Profile()
                profiler.enable()
                for _ in range(STEPS):
                    engine.step()
                profiler.disable()
                stats = pstats.Stats(profiler)
                row = {
                    "batch": batch,
                    "kv": kv,
                    "integrity": integrity,
                    "step_ms_wall": wall * 1000,
                    "step_ms_cpu": cpu * 1000,
                    "ops_self_cpu_share": {
                        e.key: round(e.self_cpu_time_total / total, 3) for e in top
                    },
                    "python_by_module": by_module(stats, stats.total_tt),  # type: ignore[attr-defined]
                }
                results["rows"].append(row)
                print(json.dumps(row, indent=1), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
