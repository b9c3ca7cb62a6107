"""Where an engine step's CPU time goes, by component, in CPU time (``time.process_time``).

The torch profiler reports wall time, which on the shared development machine mostly measures
other processes; this wraps the engine's components (attention backend and its page gathers,
MoE blocks, lm_head, sampling, integrity checks...) with CPU-time counters instead and decodes
a batch of the bench's random-init tiny models (``bench.engine_decode``'s configs).

    PYTHONPATH=. python -m bench.step_breakdown --arch glm4 --batch 64 --kv bf16

Prints milliseconds per decode step and shares; ``--out`` also writes them as JSON. Wrapped
components overlap (``attention`` includes ``attention.gather``); the counters' own cost (two
``process_time`` calls per wrapped call) is included in the step.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.engine_decode import _build, _engine, start_decoding
from bench.tiny_archs import ARCHS
from ember.models.attention.paged import PagedAttentionBackend
from ember.models.engine.model_runner import ModelRunner, PagedBatch
from ember.models.layers.moe import MoE, TopkRouter


def _timed(totals: collections.Counter, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[label] += time.process_time() - started

    return wrapper


def breakdown(arch: str, batch: int, kv: str, integrity: str, steps: int) -> dict[str, Any]:
    totals: collections.Counter = collections.Counter()
    patches = [
        (PagedAttentionBackend, "_gather", "attention.gather"),
        (PagedAttentionBackend, "_store", "attention.store"),
        (PagedAttentionBackend, "gqa", "attention"),
        (PagedAttentionBackend, "mla", "attention"),
        (PagedAttentionBackend, "indexer_topk", "attention.indexer"),
        (MoE, "forward", "moe"),
        (TopkRouter, "forward", "moe.router"),
        (PagedBatch, "build", "paged_batch.build"),
        (ModelRunner, "_verify", "integrity.verify"),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    try:
        for owner, name, label in patches:
            original = owner.__dict__[name]
            if isinstance(original, classmethod):
                wrapped = _timed(totals, label, original.__func__)
                setattr(owner, name, classmethod(wrapped))
            else:
                setattr(owner, name, _timed(totals, label, original))
        model, config = _build(arch, torch.bfloat16)
        model.lm_head.forward = _timed(totals, "lm_head", model.lm_head.forward)
        engine = _engine(model, config, "bf16", kv, integrity, batch)
        sampler = engine.runner.sampler
        sampler.sample = _timed(totals, "sampling", sampler.sample)  # type: ignore[method-assign]
        start_decoding(engine, batch, steps)
        for _ in range(3):
            engine.step()
        totals.clear()
        started = time.process_time()
        for _ in range(steps):
            engine.step()
        step_ms = (time.process_time() - started) / steps * 1e3
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
    parts = {k: round(v / steps * 1e3, 3) for k, v in sorted(totals.items())}
    return {
        "arch": arch,
        "batch": batch,
        "kv_cache_dtype": kv,
        "integrity": integrity,
        "cpu_ms_per_step": round(step_ms, 3),
        "cpu_ms_by_component": parts,
        "share_by_component": {k: round(v / step_ms, 3) for k, v in parts.items()},
        "load_average": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["glm4"], choices=ARCHS)
    parser.add_argument("--batch", nargs="+", type=int, default=[64])
    parser.add_argument("--kv", nargs="+", default=["bf16"])
    parser.add_argument("--integrity", default="off")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument(
        "--pairs",
        nargs="+",
        default=[],
        metavar="BATCH:KV",
        help="measure these (batch, KV dtype) pairs instead of every --batch x --kv, e.g. "
        "32:bf16 64:fp8_e4m3 (BF16 at the batch an equal budget allows against FP8 at twice it)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="interleaved; medians reported")
    parser.add_argument("--out", help="also write the rows as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    pairs = [(int(b), kv) for b, kv in (p.split(":", 1) for p in args.pairs)] or [
        (batch, kv) for batch in args.batch for kv in args.kv
    ]
    runs: dict[tuple[str, int, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for _ in range(args.rounds):
        for arch in args.arch:
            for batch, kv in pairs:
                row = breakdown(arch, batch, kv, args.integrity, args.steps)
                runs[arch, batch, kv].append(row)
                print(f"{arch} batch {batch} {kv}: {row['cpu_ms_per_step']:.2f} CPU ms/step")
                for label, ms in row["cpu_ms_by_component"].items():
                    share = 100 * row["share_by_component"][label]
                    print(f"  {label:20s} {ms:7.2f} ms  {share:5.1f}%", flush=True)
    rows = []
    for (arch, batch, kv), found in runs.items():
        parts = [r["cpu_ms_by_component"] for r in found]
        labels = sorted({label for part in parts for label in part})
        rows.append(
            {
                "arch": arch,
                "batch": batch,
                "kv_cache_dtype": kv,
                "integrity": args.integrity,
                "cpu_ms_per_step": statistics.median(r["cpu_ms_per_step"] for r in found),
                "cpu_ms_by_component": {
                    label: statistics.median(part.get(label, 0.0) for part in parts)
                    for label in labels
                },
                "rounds": found,
            }
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"steps": args.steps, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
