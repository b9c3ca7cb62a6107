"""Engine micro-benchmark: decode steps/s at batch 1/16/64, BF16 vs FP8 KV, integrity levels.

No HTTP, no tokenizer: the engine's own loop (schedule -> paged forward -> checks -> sample ->
postprocess) on the tiny random-init checkpoints of cpu-anchors.md (vocab 8192, hidden 256,
4 layers, 16 experts top-4), prompts of 128 random tokens. For each configuration it fills the
engine with ``batch`` requests, runs their prefill, then times ``--steps`` decode steps.
Configurations are interleaved over ``--repeats`` rounds and the median is reported, because the
machine is shared: compare ratios from one run, never absolute figures across days.

``--hf`` adds the baseline of the issue: the same checkpoint through HF transformers
``generate()`` (greedy, 128 in / 128 out), one request at a time ("naive") and as one static batch,
against the engine serving the same requests end to end (prefill included).

    PYTHONPATH=. python -m bench.engine_decode --arch kimi --batch 1 16 64 --kv bf16 fp8_e4m3
    PYTHONPATH=. python -m bench.engine_decode --arch kimi --batch 64 --integrity off sampled full
    PYTHONPATH=. python -m bench.engine_decode --arch kimi --hf --hf-batch 64

Results go to ``bench/results/engine_decode.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from bench.tiny_archs import ARCHS
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.spec import kv_layout_for

PROMPT_LEN = 128
DTYPE_NAMES = {"float32": torch.float32, "bf16": torch.bfloat16}


def _prompts(count: int, seed: int = 0, jitter: int = 0) -> list[list[int]]:
    """``count`` random prompts of ``PROMPT_LEN`` tokens, each ``jitter`` tokens longer or
    shorter at random when given (so the batch's sequences cross page boundaries at different
    steps, as served requests do, rather than together)."""
    rng = random.Random(seed)
    lengths = [PROMPT_LEN + (rng.randint(-jitter, jitter) if jitter else 0) for _ in range(count)]
    return [[rng.randrange(8192) for _ in range(length)] for length in lengths]


def _engine(
    model: Any,
    config: Any,
    dtype: str,
    kv: str,
    integrity: str,
    batch: int,
    kv_cache_bytes: int = 1 << 30,
) -> LLMEngine:
    engine_config = EngineConfig(
        kv_cache_bytes=kv_cache_bytes,
        page_size=16,
        max_num_seqs=max(batch, 1),
        max_num_batched_tokens=max(2048, batch),
        kv_cache_dtype=kv,
        integrity=integrity,
    )
    return LLMEngine(model, kv_layout_for(config), engine_config, model_dtype=dtype)


def start_decoding(engine: Any, batch: int, steps: int, jitter: int = 0) -> None:
    """Admit ``batch`` prompts and step until all are prefilled, so every later step decodes."""
    stop = StopCriteria(max_tokens=steps + 8, ignore_eos=True)
    for i, prompt in enumerate(_prompts(batch, jitter=jitter)):
        engine.add_request(str(i), prompt, stop)
    while engine.scheduler.waiting or any(
        s.num_uncomputed_tokens > 1 for s in engine.scheduler.running
    ):
        engine.step()


def measure_decode(
    model: Any,
    config: Any,
    dtype: str,
    kv: str,
    integrity: str,
    batch: int,
    steps: int,
    jitter: int = 0,
) -> dict[str, float]:
    """Decode steps/s with ``batch`` sequences whose prompts are already prefilled."""
    engine = _engine(model, config, dtype, kv, integrity, batch)
    start_decoding(engine, batch, steps, jitter)
    engine.step()  # one warm decode step (workspace buffers, caches)
    checker_start = engine.checker.stats.cpu_seconds if engine.checker else 0.0
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        engine.step()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    checker_cpu = engine.checker.stats.cpu_seconds - checker_start if engine.checker else 0.0
    return {
        "integrity_cpu_share": checker_cpu / cpu,
        "steps_per_s": steps / elapsed,
        "tokens_per_s": steps * batch / elapsed,
        # CPU seconds per step, all threads: less sensitive than wall time to other processes
        # on a shared machine (a descheduled process burns no CPU time).
        "cpu_ms_per_step": cpu / steps * 1e3,
    }


def measure_generate(
    model: Any,
    config: Any,
    dtype: str,
    kv: str,
    batch: int,
    new: int,
    kv_cache_bytes: int = 1 << 30,
    stats: dict[str, int] | None = None,
) -> tuple[float, float]:
    """Output tokens per wall second and per CPU second serving ``batch`` requests end to end
    (prefill + ``new`` tokens each). ``stats``, when given, receives the run's engine steps,
    preemptions and prompt tokens computed (recomputes included)."""
    engine = _engine(model, config, dtype, kv, "off", batch, kv_cache_bytes)
    prompts = _prompts(batch, seed=1)
    stop = StopCriteria(max_tokens=new, ignore_eos=True)
    engine.generate(prompts[:1], StopCriteria(max_tokens=2, ignore_eos=True))  # warm-up
    before = engine.stats
    steps, preemptions, prompt_tokens = (
        before.steps,
        before.preemptions,
        before.prompt_tokens_computed,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    engine.generate(prompts, stop)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if stats is not None:
        after = engine.stats
        stats.update(
            steps=after.steps - steps,
            preemptions=after.preemptions - preemptions,
            prompt_tokens_computed=after.prompt_tokens_computed - prompt_tokens,
        )
    return batch * new / wall, batch * new / cpu


def _build(arch: str, dtype: torch.dtype, device: str = "cpu") -> tuple[Any, Any]:
    """A random-init model of ``arch`` (the architectures package, imported here on purpose),
    built on the CPU (the same weights for a seed on every device) and moved to ``device``."""
    from ember.models.arch import build_model
    from ember.models.config_parse import parse_config

    config = parse_config(ARCHS[arch], source=f"bench:{arch}")
    return build_model(config, dtype=dtype).eval().to(device), config


def _device_of(model: Any) -> torch.device:
    return next(model.parameters()).device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=["kimi", "glm4", "glmdsa"], choices=ARCHS)
    parser.add_argument("--dtype", default="bf16", choices=DTYPE_NAMES, help="model weights")
    parser.add_argument("--kv", nargs="+", default=["bf16", "fp8_e4m3"])
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--integrity", nargs="+", default=["off"])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument(
        "--prompt-jitter",
        type=int,
        default=0,
        help="prompt lengths vary by up to this many tokens (staggers page boundaries)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--device",
        default="cpu",
        help="cpu or cuda[:N]: where the models and the KV pools live (integrity needs cpu)",
    )
    parser.add_argument("--hf", action="store_true", help="also compare with HF transformers")
    parser.add_argument("--hf-batch", type=int, default=64)
    parser.add_argument("--hf-new-tokens", type=int, default=128)
    parser.add_argument("--hf-naive-requests", type=int, default=4)
    parser.add_argument(
        "--equal-budget-seqs",
        type=int,
        nargs="+",
        default=[],
        help="also serve --hf-batch requests with a KV budget that holds this many whole BF16 "
        "sequences (prompt + new tokens), in each --kv dtype: FP8 over BF16 at equal bytes "
        "(several values: one comparison per budget)",
    )
    parser.add_argument(
        "--no-decode", action="store_true", help="skip the decode-step grid (--batch ...)"
    )
    parser.add_argument("--out", default="bench/results/engine_decode.json")
    parser.add_argument("--plot", help="also draw decode tok/s per batch (needs matplotlib)")
    parser.add_argument("--replot", action="store_true", help="only redraw --plot from --out")
    args = parser.parse_args()
    if args.replot:
        plot(json.loads(Path(args.out).read_text()), args.plot)
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    load_at_start = list(os.getloadavg())
    models = {}
    for arch in args.arch:
        models[arch] = _build(arch, DTYPE_NAMES[args.dtype], args.device)
    grid = [
        (arch, kv, integrity, batch)
        for arch in args.arch
        for kv in args.kv
        for integrity in args.integrity
        for batch in ([] if args.no_decode else args.batch)
    ]
    samples: dict[tuple, list[dict[str, float]]] = {key: [] for key in grid}
    for round_index in range(args.repeats):
        for key in grid:
            arch, kv, integrity, batch = key
            model, config = models[arch]
            result = measure_decode(
                model, config, args.dtype, kv, integrity, batch, args.steps, args.prompt_jitter
            )
            samples[key].append(result)
            print(
                f"round {round_index} {key}: {result['tokens_per_s']:.0f} tok/s, "
                f"{result['cpu_ms_per_step']:.2f} CPU ms/step, "
                f"integrity {100 * result['integrity_cpu_share']:.2f}% of CPU",
                flush=True,
            )
    rows = []
    for (arch, kv, integrity, batch), runs in samples.items():
        rows.append(
            {
                "arch": arch,
                "kv_cache_dtype": kv,
                "integrity": integrity,
                "batch": batch,
                "decode_steps_per_s": statistics.median(r["steps_per_s"] for r in runs),
                "decode_tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
                "best_decode_tokens_per_s": max(r["tokens_per_s"] for r in runs),
                "cpu_ms_per_step": statistics.median(r["cpu_ms_per_step"] for r in runs),
                "integrity_cpu_share": statistics.median(r["integrity_cpu_share"] for r in runs),
                "runs": runs,
            }
        )
    baselines = []
    if args.hf:
        from bench.engine_hf import compare_hf  # imports this module: loaded on demand

        for arch in args.arch:
            baselines.append(compare_hf(args, *models[arch], arch))
            print(json.dumps(baselines[-1]), flush=True)
    equal_budget = []
    for whole_seqs in args.equal_budget_seqs:
        for arch in args.arch:
            model, config = models[arch]
            tokens = PROMPT_LEN + args.hf_new_tokens
            budget = whole_seqs * tokens * kv_layout_for(config, "bf16").cell_size
            entry = {
                "arch": arch,
                "requests": args.hf_batch,
                "bf16_whole_seqs": whole_seqs,
                "kv_cache_bytes": budget,
            }
            rounds = []  # KV dtypes interleaved per round, as for the HF comparison
            for _ in range(args.repeats):
                result = {}
                for kv in args.kv:
                    stats: dict[str, int] = {}
                    wall, cpu = measure_generate(
                        model,
                        config,
                        args.dtype,
                        kv,
                        args.hf_batch,
                        args.hf_new_tokens,
                        budget,
                        stats,
                    )
                    result[f"{kv}_tokens_per_s"] = wall
                    result[f"{kv}_tokens_per_cpu_s"] = cpu
                    for key, value in stats.items():
                        result[f"{kv}_{key}"] = value
                if "bf16_tokens_per_cpu_s" in result and "fp8_e4m3_tokens_per_cpu_s" in result:
                    result["fp8_over_bf16_cpu"] = (
                        result["fp8_e4m3_tokens_per_cpu_s"] / result["bf16_tokens_per_cpu_s"]
                    )
                    result["fp8_over_bf16_wall"] = (
                        result["fp8_e4m3_tokens_per_s"] / result["bf16_tokens_per_s"]
                    )
                rounds.append(result)
            entry.update({key: statistics.median(r[key] for r in rounds) for key in rounds[0]})
            entry["rounds"] = rounds
            equal_budget.append(entry)
            print(json.dumps(entry), flush=True)
    report = {
        "benchmark": "engine_decode",
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "threads": args.threads,
            "torch": torch.__version__,
            "device": args.device,
            "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None,
            # 1/5/15-minute load averages (other jobs on the shared machine), start and end.
            "load_average_start": load_at_start,
            "load_average_end": list(os.getloadavg()),
        },
        "model_dtype": args.dtype,
        "prompt_tokens": PROMPT_LEN,
        "prompt_jitter": args.prompt_jitter,
        "steps": args.steps,
        "repeats": args.repeats,
        "decode": rows,
        "hf_comparison": baselines,
        "equal_kv_budget": equal_budget,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    if args.plot:
        plot(report, args.plot)


def plot(report: dict, path: str) -> None:
    """Decode tokens per CPU-second against batch size, one panel per architecture (CPU time:
    the development box is shared, and wall time mostly measures the other processes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["decode"] if r["integrity"] == "off"] or report["decode"]
    archs = sorted({r["arch"] for r in rows})
    figure, axes = plt.subplots(1, len(archs), figsize=(4 * len(archs), 3.2), squeeze=False)
    for axis, arch in zip(axes[0], archs, strict=True):
        for kv in sorted({r["kv_cache_dtype"] for r in rows}):
            points = sorted(
                (r["batch"], r["batch"] * 1e3 / r["cpu_ms_per_step"])
                for r in rows
                if r["arch"] == arch and r["kv_cache_dtype"] == kv
            )
            axis.plot(*zip(*points, strict=True), marker="o", label=f"{kv} KV")
        axis.set_title(f"{arch}-tiny, {report['model_dtype']} weights")
        axis.set_xlabel("concurrent sequences (decode batch)")
        axis.set_ylabel("decode tokens per CPU-second")
        axis.set_xscale("log", base=2)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
