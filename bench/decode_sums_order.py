"""The decode kernel's integrity sample sums: summed before the attention reads the pages (the
kernel before integ5) or after (now), against no sample, in one process.

GQA with glm4-tiny's shapes (2 KV heads, 4 query heads each, head dim 64, BF16, page size 16),
batch 64, contexts 130-150, one call per layer over 16 layers whose pages do not fit L3 together,
sample columns 0, 4, 8 (a sample step's share of the pages). Medians over interleaved rounds of
process CPU time per layer call, and the sums' time the kernel reports (what the integrity share
counts). The old kernel is built from a source file given on the command line:

    git show 44c9cf6:ember/models/kernels/paged_decode.c > /tmp/paged_decode_before.c
    PYTHONPATH=. python -m bench.decode_sums_order --before /tmp/paged_decode_before.c
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
    parser.add_argument("--before", required=True, help="paged_decode.c of the kernel before")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", default="bench/results/decode_sums_order.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    now = paged_decode.load()
    assert now is not None, "needs a C compiler"
    with tempfile.TemporaryDirectory() as scratch:
        library = build(Path(args.before), Path(scratch))
        before = paged_decode.PagedDecodeKernel(ctypes.CDLL(str(library)))
    seqs, kv_heads, group, dim, page, per_seq, layers = 64, 2, 4, 64, 16, 10, 16
    pool = seqs * per_seq + 1
    gen = torch.Generator().manual_seed(0)
    caches = [
        tuple(torch.randn(kv_heads, pool, page, dim, generator=gen).bfloat16() for _ in "kv")
        for _ in range(layers)
    ]
    pages = (torch.randperm(pool - 1, generator=gen)[: seqs * per_seq] + 1).contiguous()
    lens = torch.tensor([random.Random(i).randint(130, 150) for i in range(seqs)])
    q = torch.randn(seqs, kv_heads * group, dim).bfloat16()
    out = torch.empty_like(q)
    first, step = 0, 4
    sums = torch.zeros(seqs, len(range(first, per_seq, step)), dtype=torch.int64)
    cpu: dict[str, list[float]] = {"off": [], "before": [], "now": []}
    reported: dict[str, list[float]] = {"before": [], "now": []}
    load_start = list(os.getloadavg())
    for round_index in range(args.rounds):
        order = ["off", "before", "now"] if round_index % 2 else ["now", "before", "off"]
        for mode in order:
            kernel = before if mode == "before" else now
            started, summed = time.process_time(), 0.0
            for k_cache, v_cache in caches:
                if mode == "off":
                    kernel.gqa(q, k_cache, v_cache, pages, lens, out, 1.0)
                else:
                    summed += kernel.gqa(q, k_cache, v_cache, pages, lens, out, 1.0, sums,
                                         first, step)  # fmt: skip
            cpu[mode].append((time.process_time() - started) * 1e6 / layers)
            if mode != "off":
                reported[mode].append(summed * 1e6 / layers)
    report = {
        "benchmark": "decode_sums_order",
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
        "rounds": args.rounds,
        "us_per_layer_call": {m: statistics.median(v) for m, v in cpu.items()},
        "reported_sum_us_per_layer_call": {m: statistics.median(v) for m, v in reported.items()},
        "runs": {"cpu": cpu, "reported": reported},
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    keys = ("us_per_layer_call", "reported_sum_us_per_layer_call")
    print(json.dumps({k: report[k] for k in keys}))


if __name__ == "__main__":
    main()
