"""The prepacked lm_head (``layers/packed.py``) against the plain ``nn.Linear``, in one process.

One engine decoding 64 sequences; blocks of 8 decode steps alternate between the packed module
and a plain copy of it (order swapped every round), so both sides see the same contexts and the
same load; each head's own CPU time per call is measured too (a wrapper times each call). On
the shared 2-core box per-process CPU time swings +-20%, more than this effect on a whole step.

    PYTHONPATH=. python -m bench.lm_head_ab --arch glm4 kimi glmdsa

Writes ``bench/results/lm_head_ab.json`` (``--out``): CPU ms per decode step (medians) and every
round's plain/packed ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bench.engine_decode import _build, _engine, start_decoding
from ember.models.layers.packed import PackedLinear


class _Timed(nn.Module):
    """The wrapped head, with its own CPU time summed (two ``process_time`` calls a step)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.cpu_seconds = 0.0
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        started = time.process_time()
        out = self.inner(x)
        self.cpu_seconds += time.process_time() - started
        self.calls += 1
        return out


def measure(arch: str, rounds: int) -> dict[str, Any]:
    model, config = _build(arch, torch.bfloat16)
    engine = _engine(model, config, "bf16", "bf16", "off", 64)  # packs the lm_head
    packed = model.lm_head
    assert isinstance(packed, PackedLinear), "the engine did not pack the lm_head"
    heads = {True: _Timed(packed), False: _Timed(packed.unpacked())}
    start_decoding(engine, 64, 18 * rounds + 16)
    for _ in range(3):
        engine.step()
    cpu_ms: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            model.lm_head = heads[on]
            engine.step()  # not timed: the first step after a switch
            started = time.process_time()
            for _ in range(8):
                engine.step()
            cpu_ms[on].append((time.process_time() - started) / 8 * 1e3)
    model.lm_head = packed
    ratios = [b / a for a, b in zip(cpu_ms[True], cpu_ms[False], strict=True)]
    return {
        "arch": arch,
        "decode_cpu_ms_packed": statistics.median(cpu_ms[True]),
        "decode_cpu_ms_plain": statistics.median(cpu_ms[False]),
        "decode_speedup": statistics.median(cpu_ms[False]) / statistics.median(cpu_ms[True]),
        "median_round_ratio": statistics.median(ratios),
        "lm_head_cpu_ms_packed": heads[True].cpu_seconds / heads[True].calls * 1e3,
        "lm_head_cpu_ms_plain": heads[False].cpu_seconds / heads[False].calls * 1e3,
        "rounds_faster": sum(r > 1 for r in ratios),
        "round_ratios": ratios,
        "load_average": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["glm4", "kimi", "glmdsa"])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", default="bench/results/lm_head_ab.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    for arch in args.arch:
        row = measure(arch, args.rounds)
        rows.append(row)
        print(
            f"{arch}: decode {row['decode_cpu_ms_plain']:.2f} -> {row['decode_cpu_ms_packed']:.2f}"
            f" CPU ms/step ({row['decode_speedup']:.3f}x; median round "
            f"{row['median_round_ratio']:.3f}, {row['rounds_faster']}/{args.rounds} faster); "
            f"lm_head {row['lm_head_cpu_ms_plain']:.2f} -> {row['lm_head_cpu_ms_packed']:.2f} ms",
            flush=True,
        )
    report = {"benchmark": "lm_head_ab", "rounds": args.rounds, "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
