"""INT4 on a float32 model: PyTorch's CPU INT4 kernel in float32 (before) against BF16 (after).

``--dtype auto`` computes in float32 on a CPU without BF16 matmul kernels (an AVX2-only x86),
and INT4 layers used to run the CPU INT4 kernel in that compute dtype; on x86 that kernel is
vectorised for BF16 only (``ember/models/quant/int4_kernel.py``), so they now cast to BF16 and
back. Two parts, each interleaving its sides round by round in one process (the box is shared):

- matmul: CPU ms per call of one layer on float32 activations, the tiny checkpoints' INT4 shapes
  (routed expert gate/up 256 -> 128 and down 128 -> 256; with ``--quantization-targets all``
  also the dense MLP's 256 -> 768 and 768 -> 256), at 1, 16 and 64 rows: the kernel in float32,
  the kernel in BF16 with the casts (what a float32 layer runs now), and the dense float32
  ``F.linear`` for scale;
- decode: the engine's decode CPU ms per step (``bench.engine_decode.measure_decode``, KV BF16,
  integrity off) on the bench's random-init tiny models in float32, routed experts in INT4 with
  the kernel held to float32 (before) or left to ``int4_kernel_dtype`` (after), and the dense
  float32 model for scale;
- accuracy (``--accuracy ARCH``, a shipped trained checkpoint): held-out bits per byte and greedy
  agreement over 128 tokens (``bench.serving_accuracy``'s measures, KV BF16) of the float32
  model with INT4 routed experts on the float32 kernel (before) and on the chosen one (after),
  each against the dense float32 model, and after against before.

    PYTHONPATH=. python -m bench.int4_kernel_dtype --arch kimi glm4 --batch 1 16 64 --steps 16
        --rounds 2 --threads 1 --accuracy glm4moe --out bench/results/int4_kernel_dtype_avx2.json

Medians over the rounds; CPU time (``time.process_time``), so waiting for a core is not counted.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench.engine_decode import _build, measure_decode
from bench.tiny_archs import ARCHS
from ember.models.quant import QuantConfig, quantize_model
from ember.models.quant.int4 import quantize_int4
from ember.models.quant.int4_kernel import (
    cpu_capability,
    int4_cpu_kernel_linear,
    int4_kernel_dtype,
    prepare_int4_cpu_kernel,
)

SHAPES = {  # name -> (out_features, in_features)
    "expert gate/up": (128, 256),
    "expert down": (256, 128),
    "dense gate/up": (768, 256),
    "dense down": (256, 768),
}
MIN_SAMPLE_S = 0.02  # a timing sample repeats the call until it has used this much CPU


def _cpu_ms(call: Callable[[], Any]) -> float:
    call()
    repeats, cpu = 0, 0.0
    start = time.process_time()
    while cpu < MIN_SAMPLE_S:
        call()
        repeats += 1
        cpu = time.process_time() - start
    return cpu / repeats * 1e3


def _sides(
    x: torch.Tensor, weight: torch.Tensor, fp32_kernel: Any, bf16_kernel: Any
) -> dict[str, Callable[[], Any]]:
    return {
        "kernel_float32_ms": lambda: int4_cpu_kernel_linear(x, fp32_kernel),
        "kernel_bf16_cast_ms": lambda: int4_cpu_kernel_linear(x, bf16_kernel),
        "dense_float32_ms": lambda: F.linear(x, weight),
    }


def matmul_rows(rows: list[int], rounds: int) -> list[dict[str, Any]]:
    """Per shape and row count: CPU ms per call of each side, medians over ``rounds``."""
    out = []
    for name, (n, k) in SHAPES.items():
        weight = torch.randn(n, k, generator=torch.Generator().manual_seed(n * k))
        q = quantize_int4(weight, 32)
        fp32_kernel = prepare_int4_cpu_kernel(q, torch.float32)
        bf16_kernel = prepare_int4_cpu_kernel(q, torch.bfloat16)
        assert fp32_kernel is not None and bf16_kernel is not None
        for m in rows:
            sides = _sides(torch.randn(m, k), weight, fp32_kernel, bf16_kernel)
            samples: dict[str, list[float]] = {side: [] for side in sides}
            for round_index in range(rounds):
                order = list(sides) if round_index % 2 == 0 else list(reversed(sides))
                for side in order:
                    samples[side].append(_cpu_ms(sides[side]))
            row: dict[str, Any] = {"shape": name, "out": n, "in": k, "rows": m}
            row |= {side: statistics.median(values) for side, values in samples.items()}
            row["float32_over_bf16"] = row["kernel_float32_ms"] / row["kernel_bf16_cast_ms"]
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def _variants(arch: str, targets: str) -> dict[str, tuple[Any, Any]]:
    """The float32 model three ways: dense, INT4 on the float32 kernel, INT4 on the chosen one."""
    model, config = _build(arch, torch.float32)
    variants = {"dense_float32": (model, config)}
    for side, kernel in (("int4_kernel_float32", torch.float32), ("int4_kernel_auto", None)):
        copied = copy.deepcopy(model)
        quant = QuantConfig(scheme="int4", targets=targets, int4_kernel_dtype=kernel)
        quantize_model(copied, quant)
        variants[side] = (copied, config)
    return variants


def decode_rows(
    archs: list[str], batches: list[int], steps: int, rounds: int, targets: str
) -> list[dict[str, Any]]:
    out = []
    for arch in archs:
        variants = _variants(arch, targets)
        for batch in batches:
            samples: dict[str, list[dict[str, float]]] = {side: [] for side in variants}
            for round_index in range(rounds):
                order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
                for side in order:
                    model, config = variants[side]
                    result = measure_decode(model, config, "float32", "bf16", "off", batch, steps)
                    samples[side].append(result)
            row: dict[str, Any] = {"arch": arch, "batch": batch}
            for side, runs in samples.items():
                row[f"{side}_cpu_ms_per_step"] = statistics.median(
                    r["cpu_ms_per_step"] for r in runs
                )
                row[f"{side}_tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in runs)
            row["before_over_after_cpu"] = (
                row["int4_kernel_float32_cpu_ms_per_step"] / row["int4_kernel_auto_cpu_ms_per_step"]
            )
            row["runs"] = samples
            print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
            out.append(row)
    return out


def accuracy(arch: str, heldout_bytes: int, prompts: int, new_tokens: int) -> dict[str, Any]:
    """Bits per byte and greedy agreement, float32 compute, INT4 experts before and after."""
    import tempfile

    from bench.serving import ARCHS as CHECKPOINTS
    from bench.serving import checkpoint, prompts_for
    from bench.serving_accuracy import agreement, greedy_runs, heldout_windows, paged_bits_per_byte
    from ember.models.loader import load_model
    from ember.models.tokenizer import Tokenizer

    directory, trained = checkpoint(CHECKPOINTS[arch], Path(tempfile.mkdtemp(prefix="ember-")))
    windows, num_bytes = heldout_windows(Tokenizer.from_dir(directory), heldout_bytes, 512)
    requests = prompts_for(directory, prompts, 128, seed=1)
    entry: dict[str, Any] = {"checkpoint": CHECKPOINTS[arch], "trained_weights": trained}
    runs: dict[str, list[list[int]]] = {}
    for side, kernel in (
        ("dense_float32", None),
        ("int4_kernel_float32", torch.float32),
        ("int4_kernel_auto", None),
    ):
        loaded = load_model(directory, dtype=torch.float32)
        if side != "dense_float32":
            quant = QuantConfig(scheme="int4", targets="experts", int4_kernel_dtype=kernel)
            report = quantize_model(loaded.model, quant)
            entry[f"{side}_ran_in"] = str(report.int4_kernel_dtype)
        started = time.process_time()
        bpb = paged_bits_per_byte(loaded.model, loaded.config, "bf16", windows, num_bytes)
        runs[side] = greedy_runs(
            loaded.model, loaded.config, "bf16", requests, new_tokens, "float32"
        )
        entry[side] = {"bits_per_byte": bpb["bits_per_byte"], "tokens": bpb["tokens"]}
        entry[side]["cpu_s"] = time.process_time() - started
        entry[side]["greedy_vs_dense_float32"] = agreement(runs[side], runs["dense_float32"])
        print(json.dumps({side: entry[side]}), flush=True)
    entry["greedy_after_vs_before"] = agreement(
        runs["int4_kernel_auto"], runs["int4_kernel_float32"]
    )
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["kimi", "glm4"], choices=ARCHS)
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quantization-targets", default="experts", choices=["experts", "all"])
    parser.add_argument("--no-matmul", action="store_true", help="skip the per-layer part")
    parser.add_argument("--no-decode", action="store_true", help="skip the engine part")
    parser.add_argument("--accuracy", choices=["kimi", "glm4moe", "glmdsa"], help="checkpoint")
    parser.add_argument("--heldout-bytes", type=int, default=30_000)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", default="bench/results/int4_kernel_dtype.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    report: dict[str, Any] = {
        "benchmark": "int4_kernel_dtype",
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "aten_cpu_capability": cpu_capability(),
            "onednn_bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
            "int4_kernel_dtype_for_float32": str(int4_kernel_dtype(torch.float32)),
            "threads": args.threads,
            "torch": torch.__version__,
            "load_average_start": list(os.getloadavg()),
        },
        "args": {k: v for k, v in vars(args).items() if k != "out"},
    }
    report["matmul"] = [] if args.no_matmul else matmul_rows(args.batch, args.rounds)
    report["decode"] = (
        []
        if args.no_decode
        else decode_rows(args.arch, args.batch, args.steps, args.rounds, args.quantization_targets)
    )
    if args.accuracy:
        report["accuracy"] = accuracy(
            args.accuracy, args.heldout_bytes, args.prompts, args.new_tokens
        )
    report["machine"]["load_average_end"] = list(os.getloadavg())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
