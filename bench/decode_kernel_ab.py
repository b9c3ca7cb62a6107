"""The native paged decode kernel (``kernels/paged_decode.c``) against the torch gather path,
in one process.

One engine decoding 64 sequences (prompts of 128 random tokens, BF16 weights, one thread);
blocks of 8 decode steps alternate between the kernel and the torch path (the runner's
``Workspace.decode_kernel`` set to ``None``), order swapped every round, so both sides see the
same contexts and the same load. Each attention call's CPU time is summed too (a wrapper around
the backend's ``gqa``/``mla``). Integrity ``sampled`` (the default) includes the steps whose
content sample the attention sums.

    PYTHONPATH=. python -m bench.decode_kernel_ab --arch glm4 kimi glmdsa --kv bf16 fp8_e4m3

Writes ``bench/results/decode_kernel_ab.json`` (``--out``): CPU ms per decode step and per step's
attention (medians) and every round's torch/kernel ratio.
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

from bench.engine_decode import _build, _engine, start_decoding
from ember.models.attention.paged import PagedAttentionBackend


class _AttentionClock:
    """Sums the CPU time of every ``gqa``/``mla`` call (patched on the class for the run)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved = {name: getattr(PagedAttentionBackend, name) for name in ("gqa", "mla")}

    def __enter__(self) -> _AttentionClock:
        for name, method in self._saved.items():
            setattr(PagedAttentionBackend, name, self._timed(method))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, method in self._saved.items():
            setattr(PagedAttentionBackend, name, method)

    def _timed(self, method: Any) -> Any:
        def timed(backend: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return method(backend, *args, **kwargs)
            finally:
                self.seconds += time.process_time() - started

        return timed


def measure(arch: str, kv: str, integrity: str, rounds: int) -> dict[str, Any]:
    model, config = _build(arch, torch.bfloat16)
    engine = _engine(model, config, "bf16", kv, integrity, 64)
    workspace = engine.runner.workspace
    kernel = workspace.decode_kernel
    if kernel is None:
        raise SystemExit("the decode kernel could not be built here (see the log line above)")
    start_decoding(engine, 64, 18 * rounds + 16)
    for _ in range(3):
        engine.step()
    step_ms: dict[bool, list[float]] = {True: [], False: []}
    attn_ms: dict[bool, list[float]] = {True: [], False: []}
    with _AttentionClock() as clock:
        for r in range(rounds):
            for on in (True, False) if r % 2 == 0 else (False, True):
                workspace.decode_kernel = kernel if on else None
                engine.step()  # not timed: the first step after a switch
                clock.seconds = 0.0
                started = time.process_time()
                for _ in range(8):
                    engine.step()
                step_ms[on].append((time.process_time() - started) / 8 * 1e3)
                attn_ms[on].append(clock.seconds / 8 * 1e3)
    workspace.decode_kernel = kernel
    ratios = [b / a for a, b in zip(step_ms[True], step_ms[False], strict=True)]
    return {
        "arch": arch,
        "kv_cache_dtype": kv,
        "integrity": integrity,
        "decode_cpu_ms_kernel": statistics.median(step_ms[True]),
        "decode_cpu_ms_torch": statistics.median(step_ms[False]),
        "decode_speedup": statistics.median(step_ms[False]) / statistics.median(step_ms[True]),
        "median_round_ratio": statistics.median(ratios),
        "rounds_faster": sum(r > 1 for r in ratios),
        "attention_cpu_ms_kernel": statistics.median(attn_ms[True]),
        "attention_cpu_ms_torch": statistics.median(attn_ms[False]),
        "round_ratios": ratios,
        "load_average": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["glm4", "kimi", "glmdsa"])
    parser.add_argument("--kv", nargs="+", default=["bf16", "fp8_e4m3"])
    parser.add_argument("--integrity", default="sampled")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default="bench/results/decode_kernel_ab.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    for arch in args.arch:
        for kv in args.kv:
            row = measure(arch, kv, args.integrity, args.rounds)
            rows.append(row)
            print(
                f"{arch} {kv}: decode {row['decode_cpu_ms_torch']:.2f} -> "
                f"{row['decode_cpu_ms_kernel']:.2f} CPU ms/step ({row['decode_speedup']:.3f}x;"
                f" median round {row['median_round_ratio']:.3f}, {row['rounds_faster']}/"
                f"{args.rounds} faster); attention {row['attention_cpu_ms_torch']:.2f} -> "
                f"{row['attention_cpu_ms_kernel']:.2f} ms/step",
                flush=True,
            )
    report = {"benchmark": "decode_kernel_ab", "rounds": args.rounds, "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
