"""Branch glmfast's fast paths on and off inside one process, alternating blocks of steps.

``bench.engine_ab`` compares two trees in separate processes; on the shared 2-core box its
per-process figures swing by +-20%, more than the effect measured here. This script keeps one
engine and one set of weights, and switches four paths between this tree's version and the base
tree's (``--base``, e.g. a ``git archive`` of main): joined q/k/v and gate/up projections
(``layers/fused.py``; off = the separate modules), the grouped MoE (``layers/moe_grouped.py``),
the two-level greedy pick (``engine/sampling.py``; off = ``greedy_tokens_reference``) and the
paged GQA attention (``attention/paged.py``). Decode: 64 sequences, blocks of 8 steps, the two
sides alternating (order swapped every round) so both see the same contexts and the same load.
Prefill: 64 prompts of 128 tokens into a fresh engine, alternating.

    PYTHONPATH=. python -m bench.fastpath_ab --base <dir> --arch glm4 kimi

Writes ``bench/results/fastpath_ab.json`` (``--out``): CPU ms per decode step and CPU seconds
per prefill, medians, and every round's ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

import ember.models.engine.sampling as sampling
import ember.models.layers.moe as moe
from bench.engine_decode import _build, _engine, _prompts, start_decoding
from ember.models.attention.paged import PagedAttentionBackend
from ember.models.engine.sequence import StopCriteria
from ember.models.layers.fused import JoinedLinears


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _switch(base: Path) -> Callable[[bool], None]:
    """``switch(True)``: this tree's paths; ``switch(False)``: the base tree's."""
    old_moe = _load("_base_moe_grouped", base / "ember/models/layers/moe_grouped.py")
    old_paged = _load("_base_paged", base / "ember/models/attention/paged.py")
    fast = (JoinedLinears.get, moe.grouped_experts, sampling.greedy_tokens)
    fast_gqa = PagedAttentionBackend.gqa

    def switch(on: bool) -> None:
        if on:
            JoinedLinears.get, moe.grouped_experts, sampling.greedy_tokens = fast  # type: ignore[method-assign]
            PagedAttentionBackend.gqa = fast_gqa  # type: ignore[method-assign]
        else:
            JoinedLinears.get = lambda self, *linears: None  # type: ignore[method-assign]
            moe.grouped_experts = old_moe.grouped_experts
            sampling.greedy_tokens = sampling.greedy_tokens_reference
            PagedAttentionBackend.gqa = old_paged.PagedAttentionBackend.gqa  # type: ignore[method-assign]

    return switch


def measure(arch: str, kv: str, switch: Callable[[bool], None], rounds: int) -> dict[str, Any]:
    model, config = _build(arch, torch.bfloat16)
    engine = _engine(model, config, "bf16", kv, "off", 64)
    start_decoding(engine, 64, 24 * rounds + 16)
    for _ in range(3):
        engine.step()
    decode: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            switch(on)
            engine.step()  # not timed: the first step after a switch
            started = time.process_time()
            for _ in range(8):
                engine.step()
            decode[on].append((time.process_time() - started) / 8 * 1e3)
    prefill: dict[bool, list[float]] = {True: [], False: []}
    for r in range(max(2, rounds // 3)):
        for on in (True, False) if r % 2 == 0 else (False, True):
            switch(on)
            fresh = _engine(model, config, "bf16", kv, "off", 64)
            fresh.generate(_prompts(2, 9), StopCriteria(max_tokens=1, ignore_eos=True))
            started = time.process_time()
            fresh.generate(_prompts(64, 10 + r), StopCriteria(max_tokens=1, ignore_eos=True))
            prefill[on].append(time.process_time() - started)
    switch(True)
    return {
        "arch": arch,
        "kv_cache_dtype": kv,
        "decode_cpu_ms_this": statistics.median(decode[True]),
        "decode_cpu_ms_base": statistics.median(decode[False]),
        "decode_speedup": statistics.median(decode[False]) / statistics.median(decode[True]),
        "decode_round_ratios": [b / a for a, b in zip(decode[True], decode[False], strict=True)],
        "prefill_cpu_s_this": statistics.median(prefill[True]),
        "prefill_cpu_s_base": statistics.median(prefill[False]),
        "prefill_speedup": statistics.median(prefill[False]) / statistics.median(prefill[True]),
        "load_average": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other ember checkout")
    parser.add_argument("--arch", nargs="+", default=["glm4", "kimi"])
    parser.add_argument("--kv", nargs="+", default=["bf16"])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", default="bench/results/fastpath_ab.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    switch = _switch(Path(args.base).resolve())
    rows = []
    for arch in args.arch:
        for kv in args.kv:
            row = measure(arch, kv, switch, args.rounds)
            rows.append(row)
            print(
                f"{arch} {kv}: decode {row['decode_cpu_ms_base']:.2f} -> "
                f"{row['decode_cpu_ms_this']:.2f} CPU ms/step ({row['decode_speedup']:.3f}x), "
                f"prefill {row['prefill_cpu_s_base']:.3f} -> {row['prefill_cpu_s_this']:.3f} "
                f"CPU s ({row['prefill_speedup']:.3f}x)",
                flush=True,
            )
    report = {"benchmark": "fastpath_ab", "rounds": args.rounds, "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
