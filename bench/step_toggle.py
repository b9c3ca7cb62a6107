"""One decode engine, blocks of steps alternating between two settings of a path: the step-level
effect of branch fp8ratio3's greedy kernel and decode-kernel changes, resolvable where whole runs
(``bench.fp8ratio_toggle``) are not.

For each model and (batch, KV dtype) pair, one engine decodes; every block of ``--block`` steps
runs with one setting, the next with the other (the order alternating per round), and the CPU
time of each block is taken. Settings: ``greedy`` switches the sampler's native pick
(``kernels/greedy.c``) against the torch pick; ``kernel`` switches the paged decode kernel between
this tree's ``paged_decode.c`` and ``--base``'s; ``both`` switches the two together.

    PYTHONPATH=. python -m bench.step_toggle --base <dir with the old paged_decode.c>

Writes ``bench/results/step_toggle.json``: per pair and path, CPU ms per step off and on (medians
of the rounds) and the median of the per-round off/on ratios.
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

from bench.engine_decode import _build, _engine, start_decoding
from bench.tiny_archs import ARCHS
from ember.models.kernels import greedy, paged_decode
from ember.models.kernels.build import load_kernel

log = logging.getLogger(__name__)


def _set(engine: Any, path: str, value: Any) -> None:
    if path == "both":
        for part, part_value in zip(("greedy", "kernel"), value, strict=True):
            _set(engine, part, part_value)
    elif path == "greedy":
        engine.runner.sampler._kernel = value
    else:
        engine.runner.workspace.decode_kernel = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="a checkout with the old paged_decode.c")
    parser.add_argument("--arch", nargs="+", default=["kimi", "glm4", "glmdsa"], choices=ARCHS)
    parser.add_argument("--pairs", nargs="+", default=["32:bf16", "64:fp8_e4m3"])
    parser.add_argument("--block", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--paths", nargs="+", default=["greedy", "kernel", "both"])
    parser.add_argument("--out", default="bench/results/step_toggle.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    old = Path(args.base) / "ember" / "models" / "kernels" / "paged_decode.c"
    values = {
        "greedy": (None, greedy.load()),
        "kernel": (
            load_kernel(old, paged_decode.PagedDecodeKernel, log, "old"),
            paged_decode.load(),
        ),
    }
    if values["greedy"][1] is None or None in values["kernel"]:
        raise SystemExit("a kernel could not be built: nothing to compare")
    values["both"] = (
        (values["greedy"][0], values["kernel"][0]),
        (values["greedy"][1], values["kernel"][1]),
    )
    load_start, rows = list(os.getloadavg()), []
    for arch in args.arch:
        model, config = _build(arch, torch.bfloat16)
        for pair in args.pairs:
            batch, kv = int(pair.split(":")[0]), pair.split(":")[1]
            for path in args.paths:
                off, on = values[path]
                steps = 2 * args.block * args.rounds
                engine = _engine(model, config, "bf16", kv, "off", batch)
                start_decoding(engine, batch, steps + 4)
                engine.step()
                times: dict[str, list[float]] = {"off": [], "on": []}
                for index in range(args.rounds):
                    order = [("off", off), ("on", on)]
                    if index % 2:
                        order.reverse()
                    for name, value in order:
                        _set(engine, path, value)
                        started = time.process_time()
                        for _ in range(args.block):
                            engine.step()
                        times[name].append((time.process_time() - started) / args.block * 1e3)
                ratios = [a / b for a, b in zip(times["off"], times["on"], strict=True)]
                row = {
                    "arch": arch,
                    "batch": batch,
                    "kv_cache_dtype": kv,
                    "path": path,
                    "off_cpu_ms_per_step": statistics.median(times["off"]),
                    "on_cpu_ms_per_step": statistics.median(times["on"]),
                    "off_over_on": statistics.median(ratios),
                    "rounds_on_faster": sum(r > 1 for r in ratios),
                    "rounds": args.rounds,
                    "times": times,
                }
                rows.append(row)
                print(
                    f"{arch} {batch} {kv} {path}: off {row['off_cpu_ms_per_step']:.2f} on "
                    f"{row['on_cpu_ms_per_step']:.2f} ms/step, off/on {row['off_over_on']:.3f} "
                    f"({row['rounds_on_faster']}/{args.rounds} rounds faster)",
                    flush=True,
                )
    report = {
        "benchmark": "step_toggle",
        "block_steps": args.block,
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
