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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.engine_decode import ARCHS, _build, _engine, start_decoding
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
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--kv", default="bf16")
    parser.add_argument("--integrity", default="off")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--out", help="also write the rows as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    for arch in args.arch:
        row = breakdown(arch, args.batch, args.kv, args.integrity, args.steps)
        rows.append(row)
        print(f"{arch} batch {args.batch} {args.kv}: {row['cpu_ms_per_step']:.2f} CPU ms/step")
        for label, ms in row["cpu_ms_by_component"].items():
            print(f"  {label:20s} {ms:7.2f} ms  {100 * row['share_by_component'][label]:5.1f}%")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
