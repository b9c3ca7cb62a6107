"""What FP8 KV and INT4 weights cost and buy, per architecture: KV capacity at equal bytes,
weight bytes (BF16 / FP8 / INT4, routed experts only and all linear layers), held-out bits per
byte and greedy-token agreement over 128 tokens, for BF16, FP8 KV, INT4 (experts), and both.

Both accuracy measures run through the serving path, not the plain reference forward:

- bits per byte: each held-out window is prefilled through the paged attention backend with the
  KV pool in the configuration's dtype (the backend attends new tokens *from the cache*, after
  storing them, so FP8 rounding applies to every key and value read), logits for every position;
  the summed negative log-likelihood of the text tokens, in bits, over the text's UTF-8 bytes;
- greedy agreement: the engine (``LLMEngine``, as the server runs it) generates 128 tokens
  greedily for held-out prompts; agreement is the share of positions equal to the BF16 run
  (position by position), the share of prompts whose 128 tokens are all equal, and the mean
  length of the common prefix. Once one token differs the continuations part, so the figure to
  read them against is the ``fp32`` row: exact float32 arithmetic against BF16, i.e. how much
  BF16's own rounding already moves greedy tokens.

    PYTHONPATH=. python -m bench.serving_accuracy --arch kimi glm4moe glmdsa

Results: ``bench/results/serving_accuracy.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.serving import ARCHS, REPO, checkpoint, prompts_for
from bench.serving_probe import load_average
from ember.models.attention.backend import BatchLayout
from ember.models.attention.paged import PagedAttentionBackend, PagedBatch, Workspace
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.pool import KVPool
from ember.models.kv.spec import kv_capacity, kv_layout_for
from ember.models.loader import load_model
from ember.models.quant import QuantConfig, model_weight_bytes, quantize_model
from ember.models.tokenizer import Tokenizer
from ember.models.training.pipeline import heldout_files

CONFIGS = {  # name -> (weights, kv dtype); bf16 is the reference the others are compared to
    "bf16": ("none", "bf16"),
    "fp8_kv": ("none", "fp8_e4m3"),
    "int4": ("int4", "bf16"),
    "int4_fp8_kv": ("int4", "fp8_e4m3"),
    # The noise floor: exact float32 arithmetic against BF16, i.e. how far plain BF16 rounding
    # alone moves greedy tokens on this checkpoint.
    "fp32": ("fp32", "float32"),
}


def heldout_windows(tokenizer: Tokenizer, max_bytes: int, context: int) -> tuple[list, int]:
    """Non-overlapping ``context``-token windows of the held-out files (each token scored once,
    the first of each window unscored), and the bytes of the text they cover."""
    windows, total = [], 0
    for source in heldout_files():
        text = source.text.encode("utf-8")[: max_bytes - total].decode("utf-8", errors="ignore")
        if not text:
            break
        ids = tokenizer.encode(text, allow_special=False)
        for start in range(0, len(ids) - 1, context):
            window = ids[start : start + context]
            if len(window) > 1:
                windows.append(window)
        total += len(text.encode("utf-8"))
        if total >= max_bytes:
            break
    return windows, total


@torch.inference_mode()
def paged_bits_per_byte(model, config, kv_dtype: str, windows: list, num_bytes: int) -> dict:
    """Teacher-forced NLL through the paged backend, windows batched as separate sequences."""
    spec = kv_layout_for(config, kv_dtype)
    page = 16
    nats, tokens = 0.0, 0
    for i in range(0, len(windows), 4):
        batch = windows[i : i + 4]
        tables, next_page = [], 0
        for w in batch:
            pages = -(-len(w) // page)
            tables.append(list(range(next_page, next_page + pages)))
            next_page += pages
        pool = KVPool(spec, next_page, page, integrity=False)
        layout = BatchLayout(tuple(len(w) for w in batch), tuple(0 for _ in batch))
        paged = PagedBatch.build(layout, tables, page, pool.padding_page)
        backend = PagedAttentionBackend(pool, paged, Workspace())
        ids = torch.tensor([t for w in batch for t in w])
        logp = F.log_softmax(model.forward(ids, backend, None).float(), dim=-1)
        row = 0
        for w in batch:
            targets = torch.tensor(w[1:])
            picked = logp[row : row + len(w) - 1].gather(1, targets[:, None])
            nats -= float(picked.sum())
            tokens += len(targets)
            row += len(w)
    bits = nats / math.log(2)
    return {"bits_per_byte": bits / num_bytes, "bits": bits, "bytes": num_bytes, "tokens": tokens}


def greedy_runs(
    model, config, kv_dtype: str, prompts: list, new_tokens: int, model_dtype: str = "bf16"
) -> list[list[int]]:
    engine = LLMEngine(
        model,
        kv_layout_for(config),
        EngineConfig(
            kv_cache_bytes=64 * 2**20,
            kv_cache_dtype=kv_dtype,
            integrity="off",
            max_num_seqs=len(prompts),
            max_num_batched_tokens=max(2048, len(prompts)),
        ),
        model_dtype=model_dtype,  # type: ignore[arg-type]
    )
    return engine.generate(prompts, StopCriteria(max_tokens=new_tokens, ignore_eos=True))


def agreement(runs: list[list[int]], reference: list[list[int]]) -> dict:
    positions = sum(len(r) for r in reference)
    same = sum(
        a == b
        for run, ref in zip(runs, reference, strict=True)
        for a, b in zip(run, ref, strict=True)
    )
    prefixes = []
    for run, ref in zip(runs, reference, strict=True):
        n = 0
        while n < len(ref) and run[n] == ref[n]:
            n += 1
        prefixes.append(n)
    return {
        "positions_equal": same / positions,
        "sequences_identical": sum(p == len(r) for p, r in zip(prefixes, reference, strict=True))
        / len(reference),
        "mean_common_prefix": sum(prefixes) / len(prefixes),
    }


def weight_bytes(directory: Path) -> dict:
    out = {}
    for targets in ("experts", "all"):
        for scheme in ("none", "fp8", "int4"):
            if scheme == "none" and targets == "all":
                continue
            model = load_model(directory, dtype=torch.bfloat16).model
            if scheme != "none":
                quantize_model(model, QuantConfig.from_flag(scheme, targets=targets))
            key = "bf16" if scheme == "none" else f"{scheme}_{targets}"
            out[key] = model_weight_bytes(model).total
    for key in list(out):
        if key != "bf16":
            out[f"{key}_vs_bf16"] = out[key] / out["bf16"]
    return out


def kv_capacity_ratio(directory: Path, budgets: list[int]) -> list[dict]:
    from ember.models.config_parse import load_config

    config = load_config(directory)
    rows = []
    for budget in budgets:
        caps = {}
        for dtype in ("bf16", "fp8_e4m3"):
            spec = kv_layout_for(config, dtype)
            cap = kv_capacity(spec, budget, 16)
            caps[dtype] = {
                "bytes_per_token": spec.cell_size,
                "capacity_tokens": cap.num_pages * 16,
                "scale_bytes": spec.scale_bytes,
            }
        ratio = caps["fp8_e4m3"]["capacity_tokens"] / caps["bf16"]["capacity_tokens"]
        rows.append({"budget_bytes": budget, **caps, "fp8_over_bf16": ratio})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=list(ARCHS), choices=ARCHS)
    parser.add_argument("--heldout-bytes", type=int, default=60_000)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "serving_accuracy.json"))
    parser.add_argument(
        "--append", action="store_true", help="keep the other architectures already in --out"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scratch = Path(tempfile.mkdtemp(prefix="ember-accuracy-"))
    report: dict = {
        "benchmark": "serving_accuracy",
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "archs": {},
    }
    report["load_at_start"] = load_average()
    if args.append and Path(args.out).is_file():
        # Each architecture's entry carries its own settings, so runs of different ones mix.
        report["archs"] = json.loads(Path(args.out).read_text())["archs"]
    for arch in args.arch:
        started = time.time()
        directory, trained = checkpoint(ARCHS[arch], scratch)
        tokenizer = Tokenizer.from_dir(directory)
        windows, num_bytes = heldout_windows(tokenizer, args.heldout_bytes, args.context)
        prompts = prompts_for(directory, args.prompts, 128, seed=1)
        entry: dict = {
            "checkpoint": ARCHS[arch],
            "settings": report["args"] | {"arch": arch},
            "trained_weights": trained,
            "kv_capacity": kv_capacity_ratio(directory, [5 * 2**20, 2**30]),
            "weight_bytes": weight_bytes(directory),
            "configs": {},
        }
        reference_runs = None
        for name, (scheme, kv_dtype) in CONFIGS.items():
            dtype = torch.float32 if scheme == "fp32" else torch.bfloat16
            loaded = load_model(directory, dtype=dtype)
            if scheme == "int4":
                quantize_model(loaded.model, QuantConfig.from_flag(scheme, targets="experts"))
            bpb = paged_bits_per_byte(loaded.model, loaded.config, kv_dtype, windows, num_bytes)
            runs = greedy_runs(
                loaded.model,
                loaded.config,
                kv_dtype,
                prompts,
                args.new_tokens,
                "float32" if scheme == "fp32" else "bf16",
            )
            if reference_runs is None:
                reference_runs = runs
            row = {"weights": scheme, "kv_cache_dtype": kv_dtype, **bpb}
            row["greedy_agreement"] = agreement(runs, reference_runs)
            entry["configs"][name] = row
            print(
                f"{arch:<8} {name:<12} bpb {bpb['bits_per_byte']:.4f}  agreement "
                f"{row['greedy_agreement']['positions_equal']:.3f}",
                flush=True,
            )
        base = entry["configs"]["bf16"]["bits_per_byte"]
        for row in entry["configs"].values():
            row["bpb_change_vs_bf16"] = row["bits_per_byte"] / base - 1.0
        entry["seconds"] = time.time() - started
        report["archs"][arch] = entry
        report["load_at_end"] = load_average()
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
