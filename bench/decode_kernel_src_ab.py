"""The paged decode kernel built from this tree's ``paged_decode.c`` against another tree's, in one
process on the same pages: did a change to the C source cost time?

Both libraries are built (``kernels/build.py``, cached by source) and bound with this tree's
ctypes wrapper, so the other tree's kernel must take the same arguments. Grouped-query decode at
glm4-tiny's shapes (2 KV heads, 8 query heads, head dim 64, pages of 16), 64 sequences of 128 to
256 tokens scattered over a shuffled pool, one thread. Rounds alternate the order; each times
``--reps`` calls of each kernel by thread CPU time. The outputs must be bit-identical.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.decode_kernel_src_ab --base <dir> --kv fp8_e4m3 bf16

Writes ``bench/results/decode_kernel_src_ab.json`` (``--out``): per KV dtype, the median ms per
call of each kernel and the median of the rounds' this/base ratios.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from pathlib import Path

import torch

from ember.models.kernels.build import load_kernel
from ember.models.kernels.paged_decode import SOURCE, PagedDecodeKernel

log = logging.getLogger(__name__)
DTYPES = {
    "bf16": torch.bfloat16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
}


def _pages(dtype: torch.dtype, seed: int) -> dict[str, torch.Tensor]:
    batch, heads, kv_heads, dim, page, per_seq = 64, 8, 2, 64, 16, 16
    pool = batch * per_seq + 64
    gen = torch.Generator().manual_seed(seed)
    return {
        "q": torch.randn(batch, heads, dim, generator=gen).to(torch.bfloat16),
        "k": (torch.randn(kv_heads, pool, page, dim, generator=gen) * 0.5).to(dtype),
        "v": (torch.randn(kv_heads, pool, page, dim, generator=gen) * 0.5).to(dtype),
        "pages": torch.randperm(pool, generator=gen)[: batch * per_seq].to(torch.int64),
        "lens": torch.randint(per_seq * page // 2, per_seq * page + 1, (batch,), generator=gen),
        "out": torch.empty(batch, heads, dim, dtype=torch.bfloat16),
    }


def _time(kernel: PagedDecodeKernel, pages: dict[str, torch.Tensor], reps: int) -> float:
    started = time.thread_time()
    for _ in range(reps):
        kernel.gqa(pages["q"], pages["k"], pages["v"], pages["pages"], pages["lens"], pages["out"])
    return (time.thread_time() - started) / reps * 1e3


def measure(
    base: PagedDecodeKernel, this: PagedDecodeKernel, kv: str, rounds: int, reps: int
) -> dict[str, object]:
    sides = {"base": (base, _pages(DTYPES[kv], 0)), "this": (this, _pages(DTYPES[kv], 0))}
    for kernel, pages in sides.values():
        _time(kernel, pages, 3)  # warm caches and the page walk
    times: dict[str, list[float]] = {"base": [], "this": []}
    ratios = []
    for index in range(rounds):
        order = ("base", "this") if index % 2 == 0 else ("this", "base")
        got = {name: _time(*sides[name], reps) for name in order}
        for name, ms in got.items():
            times[name].append(ms)
        ratios.append(got["this"] / got["base"])
    identical = torch.equal(sides["base"][1]["out"], sides["this"][1]["out"])
    return {
        "kv_cache_dtype": kv,
        "base_ms": statistics.median(times["base"]),
        "this_ms": statistics.median(times["this"]),
        "this_over_base": statistics.median(ratios),
        "rounds_this_faster": sum(r < 1 for r in ratios),
        "rounds": rounds,
        "outputs_identical": identical,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other ember checkout")
    parser.add_argument("--kv", nargs="+", default=["fp8_e4m3", "bf16"], choices=sorted(DTYPES))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", default="bench/results/decode_kernel_src_ab.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    base_source = Path(args.base) / "ember/models/kernels/paged_decode.c"
    base = load_kernel(base_source, PagedDecodeKernel, log, "base kernel")
    this = load_kernel(SOURCE, PagedDecodeKernel, log, "this kernel")
    if base is None or this is None:
        raise SystemExit("a kernel could not be built (see the log line above)")
    rows = [measure(base, this, kv, args.rounds, args.reps) for kv in args.kv]
    for row in rows:
        print(json.dumps(row))
    result = {"benchmark": "decode_kernel_src_ab", "load_average": os.getloadavg(), "rows": rows}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
