"""FP8 over BF16 at equal KV bytes with this branch's fast paths switched on and off in one process.

Between processes the shared machine's load moves the FP8/BF16 ratio by more than a change of a
few percent does (``bench.equal_budget_ab``); within one process, alternating, it does not as
much. This switches, per engine, the two paths branch fp8ratio3 changed: the greedy pick
(``kernels/greedy.c`` against the torch two-level pick, ``sampling.greedy_tokens``) and the paged
decode kernel (this tree's ``paged_decode.c`` against the one at ``--base``, built from its
source). "off" is therefore the tree the branch started from, for these paths.

Per round, for each setting (the order alternating between rounds): end to end, output tokens per
CPU-second serving 64 requests of 128 in / 128 out with BF16 and then FP8 KV in a budget of
``--equal-budget-seqs`` whole BF16 requests; decode only, CPU ms per step at that BF16 batch and
at twice it with FP8 KV (no budget limit). Ratios per round, medians reported.

    PYTHONPATH=. python -m bench.fp8ratio_toggle --base <dir with the old paged_decode.c>

Writes ``bench/results/fp8ratio_toggle.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from bench.engine_decode import PROMPT_LEN, _build, _engine, _prompts, start_decoding
from bench.tiny_archs import ARCHS
from ember.models.engine.sequence import StopCriteria
from ember.models.kernels import greedy, paged_decode
from ember.models.kernels.build import load_kernel
from ember.models.kv.spec import kv_layout_for

log = logging.getLogger(__name__)


def _apply(engine: Any, setting: dict[str, Any]) -> Any:
    engine.runner.workspace.decode_kernel = setting["decode_kernel"]
    engine.runner.sampler._kernel = setting["greedy"]
    return engine


def _generate(model: Any, config: Any, kv: str, budget: int, setting: dict) -> float:
    """Output tokens per CPU-second serving 64 requests end to end (as ``measure_generate``)."""
    engine = _apply(_engine(model, config, "bf16", kv, "off", 64, budget), setting)
    prompts = _prompts(64, seed=1)
    engine.generate(prompts[:1], StopCriteria(max_tokens=2, ignore_eos=True))  # warm-up
    started = time.process_time()
    engine.generate(prompts, StopCriteria(max_tokens=128, ignore_eos=True))
    return 64 * 128 / (time.process_time() - started)


def _decode(model: Any, config: Any, kv: str, batch: int, steps: int, setting: dict) -> float:
    """CPU ms per decode step at ``batch`` (as ``measure_decode``)."""
    engine = _apply(_engine(model, config, "bf16", kv, "off", batch), setting)
    start_decoding(engine, batch, steps)
    engine.step()
    started = time.process_time()
    for _ in range(steps):
        engine.step()
    return (time.process_time() - started) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="a checkout with the old paged_decode.c")
    parser.add_argument("--arch", nargs="+", default=["kimi", "glm4", "glmdsa"], choices=ARCHS)
    parser.add_argument("--equal-budget-seqs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default="bench/results/fp8ratio_toggle.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    old = Path(args.base) / "ember" / "models" / "kernels" / "paged_decode.c"
    settings = {
        "off": {
            "decode_kernel": load_kernel(old, paged_decode.PagedDecodeKernel, log, "old"),
            "greedy": None,
        },
        "on": {"decode_kernel": paged_decode.load(), "greedy": greedy.load()},
    }
    if any(settings[name][part] is None for name in settings for part in settings[name]):
        if settings["off"]["greedy"] is not None or settings["on"]["greedy"] is None:
            raise SystemExit("a kernel could not be built: nothing to compare")
        if settings["off"]["decode_kernel"] is None or settings["on"]["decode_kernel"] is None:
            raise SystemExit("a kernel could not be built: nothing to compare")
    seqs, load_start = args.equal_budget_seqs, list(os.getloadavg())
    rows = []
    for arch in args.arch:
        model, config = _build(arch, torch.bfloat16)
        budget = seqs * (PROMPT_LEN + 128) * kv_layout_for(config, "bf16").cell_size
        rounds: list[dict[str, float]] = []
        for index in range(args.rounds):
            names = ["off", "on"] if index % 2 == 0 else ["on", "off"]
            result: dict[str, float] = {}
            for name in names:
                setting = settings[name]
                bf16 = _generate(model, config, "bf16", budget, setting)
                fp8 = _generate(model, config, "fp8_e4m3", budget, setting)
                step_bf16 = _decode(model, config, "bf16", seqs, args.steps, setting)
                step_fp8 = _decode(model, config, "fp8_e4m3", 2 * seqs, args.steps, setting)
                result.update(
                    {
                        f"{name}_bf16_tokens_per_cpu_s": bf16,
                        f"{name}_fp8_tokens_per_cpu_s": fp8,
                        f"{name}_end_to_end_ratio": fp8 / bf16,
                        f"{name}_bf16_decode_cpu_ms": step_bf16,
                        f"{name}_fp8_decode_cpu_ms": step_fp8,
                        f"{name}_decode_ratio": 2 * step_bf16 / step_fp8,
                    }
                )
            result["load_average"] = os.getloadavg()[0]
            rounds.append(result)
            print(arch, index, json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True)
        row: dict[str, Any] = {"arch": arch, "kv_cache_bytes": budget}
        for key in rounds[0]:
            row[key] = statistics.median(r[key] for r in rounds)
        row["rounds"] = rounds
        rows.append(row)
        print(
            f"{arch}: end to end {row['off_end_to_end_ratio']:.3f} -> "
            f"{row['on_end_to_end_ratio']:.3f}, decode {row['off_decode_ratio']:.3f} -> "
            f"{row['on_decode_ratio']:.3f}",
            flush=True,
        )
    report = {
        "benchmark": "fp8ratio_toggle",
        "requests": 64,
        "equal_budget_seqs": seqs,
        "decode_steps": args.steps,
        "rounds": args.rounds,
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
