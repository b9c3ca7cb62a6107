"""The decode kernel's integrity sample sums: summed before the attention reads the pages (the
kernel before integ5) or after (now), against no sample, in one process.

GQA with glm4-tiny's shapes (2 KV heads, 4 query heads each, head dim 64, BF16, page size 16;
``--arch kimi``: absorbed MLA with kimi-tiny's, one latent row of 64 + 16, 4 query heads),
batch 64, contexts 130-150, one call per layer over 16 layers whose pages do not fit L3
together, sample columns 0, 4, 8 (a sample step's share of the pages). Medians over
interleaved rounds of process CPU time per layer call, and the sums' time the kernel reports
(what the integrity share counts). The old kernel, when compared, is built from a source file
given on the command line:

    git show 44c9cf6:ember/models/kernels/paged_decode.c > /tmp/paged_decode_before.c
    PYTHONPATH=. python -m bench.decode_sums_order --before /tmp/paged_decode_before.c
    PYTHONPATH=. python -m bench.decode_sums_order --arch kimi   # off against now only

The difference between a layer call with the sample and one without, against the time the
kernel reports, is what the integrity share misses (or over-counts) of the kernel's sums.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch

from ember.models.kernels import paged_decode
from ember.models.kernels.build import build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="paged_decode.c of the kernel before (optional)")
    parser.add_argument("--arch", choices=["glm4", "kimi"], default="glm4")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", help="default: bench/results/decode_sums_order[_kimi].json")
    args = parser.parse_args()
    suffix = "" if args.arch == "glm4" else f"_{args.arch}"
    out_path = args.out or f"bench/results/decode_sums_order{suffix}.json"
    torch.set_num_threads(1)
    now = paged_decode.load()
    assert now is not None, "needs a C compiler"
    kernels = {"off": now, "now": now}
    if args.before:
        with tempfile.TemporaryDirectory() as scratch:
            library = build(Path(args.before), Path(scratch))
            kernels["before"] = paged_decode.PagedDecodeKernel(ctypes.CDLL(str(library)))
    seqs, page, per_seq, layers = 64, 16, 10, 16
    pool = seqs * per_seq + 1
    gen = torch.Generator().manual_seed(0)
    if args.arch == "glm4":  # GQA: 2 KV heads of 4 query heads, head dim 64
        kv_heads, heads, dim, rank = 2, 8, 64, 64
        shape = (kv_heads, pool, page, dim)
        caches = [
            tuple(torch.randn(*shape, generator=gen).bfloat16() for _ in "kv")
            for _ in range(layers)
        ]
    else:  # absorbed MLA: one latent row of rank 64 + rope 16, 4 query heads
        heads, rank, dim = 4, 64, 80
        caches = [
            (torch.randn(1, pool, page, dim, generator=gen).bfloat16(), None) for _ in range(layers)
        ]
    pages = (torch.randperm(pool - 1, generator=gen)[: seqs * per_seq] + 1).contiguous()
    lens = torch.tensor([random.Random(i).randint(130, 150) for i in range(seqs)])
    q = torch.randn(seqs, heads, dim).bfloat16()
    out = torch.empty(seqs, heads, rank).bfloat16()
    first, step = 0, 4
    sums = torch.zeros(seqs, len(range(first, per_seq, step)), dtype=torch.int64)
    cpu: dict[str, list[float]] = {mode: [] for mode in kernels}
    reported: dict[str, list[float]] = {mode: [] for mode in kernels if mode != "off"}
    load_start = list(os.getloadavg())
    for round_index in range(args.rounds):
        order = sorted(kernels) if round_index % 2 else sorted(kernels, reverse=True)
        for mode in order:
            kernel = kernels[mode]
            sampled = () if mode == "off" else (sums, first, step)
            started, summed = time.process_time(), 0.0
            for k_cache, v_cache in caches:
                if v_cache is None:
                    summed += kernel.mla(q, k_cache, rank, pages, lens, out, 1.0, *sampled)
                else:
                    summed += kernel.gqa(q, k_cache, v_cache, pages, lens, out, 1.0, *sampled)
            cpu[mode].append((time.process_time() - started) * 1e6 / layers)
            if mode != "off":
                reported[mode].append(summed * 1e6 / layers)
    report = {
        "benchmark": "decode_sums_order",
        "arch": args.arch,
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
        "rounds": args.rounds,
        "us_per_layer_call": {m: statistics.median(v) for m, v in cpu.items()},
        "reported_sum_us_per_layer_call": {m: statistics.median(v) for m, v in reported.items()},
        "runs": {"cpu": cpu, "reported": reported},
    }
    Path(out_path).write_text(json.dumps(report, indent=2) + "\n")
    keys = ("us_per_layer_call", "reported_sum_us_per_layer_call")
    print(json.dumps({k: report[k] for k in keys}))


if __name__ == "__main__":
    main()
