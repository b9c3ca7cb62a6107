"""The issue's baseline for ``bench.engine_decode --hf``: the same checkpoint through HF
transformers ``generate()`` (greedy), served naively (one request at a time) and as one static
padded batch, against the engine serving the same requests end to end. Needs the test extra
(transformers)."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import torch

from bench.engine_decode import DTYPE_NAMES, _device_of, _prompts, measure_generate


def load_hf(model: Any, dtype: str) -> Any:
    """The same weights as an HF transformers model (through a saved checkpoint), on the
    model's device."""
    import transformers  # test extra; only this mode needs it

    with tempfile.TemporaryDirectory() as directory:
        _save_checkpoint(model, directory)
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            directory, dtype=DTYPE_NAMES[dtype]
        ).eval()
    hf = hf.to(_device_of(model))
    with torch.inference_mode():
        warm = torch.tensor(_prompts(1, seed=1), device=_device_of(model))
        hf.generate(warm, max_new_tokens=2, pad_token_id=0)
    return hf


def measure_hf(hf: Any, batch: int, new: int, requests: int | None = None) -> tuple[float, float]:
    """Output tokens per wall and per CPU second of HF ``generate()`` (greedy): one static
    batch of ``batch`` prompts, or (``requests``) that many prompts one ``generate`` each."""
    prompts = torch.tensor(_prompts(batch, seed=1), device=_device_of(hf))
    kwargs = dict(do_sample=False, min_new_tokens=new, max_new_tokens=new, pad_token_id=0)
    with torch.inference_mode():
        start, cpu_start = time.perf_counter(), time.process_time()
        if requests is None:
            hf.generate(prompts, **kwargs)
        else:
            for row in range(requests):
                hf.generate(prompts[row : row + 1], **kwargs)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    count = batch if requests is None else requests
    return count * new / wall, count * new / cpu


def compare_hf(args: argparse.Namespace, model: Any, config: Any, arch: str) -> dict:
    """HF static batch and ember serving the same requests, interleaved over ``--repeats``
    rounds (the shared machine's load drifts over minutes: each round's ratio compares runs a
    few seconds apart); the naive one-request-at-a-time baseline runs once (it is ~10x slower
    and far from the goal line). Figures are medians over rounds."""
    batch, new = args.hf_batch, args.hf_new_tokens
    hf = load_hf(model, args.dtype)
    rounds: list[dict[str, float]] = []
    for _ in range(args.repeats):
        result: dict[str, float] = {}
        wall, cpu = measure_hf(hf, batch, new)
        result.update(hf_static_tokens_per_s=wall, hf_static_tokens_per_cpu_s=cpu)
        for kv in args.kv:
            wall, cpu = measure_generate(model, config, args.dtype, kv, batch, new)
            result[f"ember_{kv}_tokens_per_s"] = wall
            result[f"ember_{kv}_tokens_per_cpu_s"] = cpu
            result[f"ember_{kv}_over_static_cpu"] = cpu / result["hf_static_tokens_per_cpu_s"]
        rounds.append(result)
    entry: dict[str, Any] = {"arch": arch, "batch": batch, "new_tokens": new}
    entry.update({key: statistics.median(r[key] for r in rounds) for key in rounds[0]})
    wall, cpu = measure_hf(hf, batch, new, requests=args.hf_naive_requests)
    entry.update(hf_naive_tokens_per_s=wall, hf_naive_tokens_per_cpu_s=cpu)
    entry["rounds"] = rounds
    entry["load_average"] = list(os.getloadavg())
    return entry


def _save_checkpoint(model: Any, directory: str) -> None:
    from ember.models.loader import save_checkpoint

    save_checkpoint(model, directory)
