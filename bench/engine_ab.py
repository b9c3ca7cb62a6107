"""Engine speed against another checkout of ember (e.g. the commit a change started from).

Each measurement runs in a fresh process with ``PYTHONPATH`` set to one tree, alternating the
trees per configuration and round so both see the same drift in the shared machine's load:
decode CPU ms per step at batch 64 (``bench.engine_decode.measure_decode``, 16 steps) and
output tokens per CPU-second serving 64 requests of 128 in / 128 out end to end
(``measure_generate``), on the bench's random-init tiny models, BF16 weights, one thread.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.engine_ab --base <dir> --rounds 2

Both trees must have ``bench/engine_decode.py``. Writes ``bench/results/engine_ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from bench.trees import run_in_tree

_ONE = """
import json, sys, torch
from bench.engine_decode import _build, measure_decode, measure_generate
torch.set_num_threads(1); torch.manual_seed(0)
arch, kv = sys.argv[1], sys.argv[2]
model, config = _build(arch, torch.bfloat16)
dec = measure_decode(model, config, "bf16", kv, "off", 64, 16)
_, cpu = measure_generate(model, config, "bf16", kv, 64, 128)
print(json.dumps({"decode_cpu_ms": dec["cpu_ms_per_step"], "generate_tokens_per_cpu_s": cpu}))
"""


def _measure(tree: Path, arch: str, kv: str) -> dict[str, float]:
    return run_in_tree(tree, _ONE, arch, kv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other ember checkout")
    parser.add_argument("--arch", nargs="+", default=["kimi", "glm4", "glmdsa"])
    parser.add_argument("--kv", nargs="+", default=["bf16", "fp8_e4m3"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="bench/results/engine_ab.json")
    args = parser.parse_args()
    trees = {"base": Path(args.base).resolve(), "this": Path.cwd().resolve()}
    runs: dict[str, list[dict]] = {}
    load_start = list(os.getloadavg())
    for _ in range(args.rounds):
        for arch in args.arch:
            for kv in args.kv:
                for name, tree in trees.items():
                    result = _measure(tree, arch, kv)
                    runs.setdefault(f"{arch}/{kv}/{name}", []).append(result)
                    print(arch, kv, name, result, flush=True)
    rows = []
    for arch in args.arch:
        for kv in args.kv:
            row: dict = {"arch": arch, "kv_cache_dtype": kv}
            for name in trees:
                for key in ("decode_cpu_ms", "generate_tokens_per_cpu_s"):
                    row[f"{name}_{key}"] = statistics.median(
                        r[key] for r in runs[f"{arch}/{kv}/{name}"]
                    )
            row["decode_speedup"] = row["base_decode_cpu_ms"] / row["this_decode_cpu_ms"]
            row["generate_speedup"] = (
                row["this_generate_tokens_per_cpu_s"] / row["base_generate_tokens_per_cpu_s"]
            )
            rows.append(row)
    report = {
        "benchmark": "engine_ab",
        "rounds": args.rounds,
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
        "rows": rows,
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
