"""FP8 over BF16 KV at equal KV bytes, this checkout against another, each in its own process.

The issue's ratio (64 requests, 128 in / 128 out, a KV budget that holds ``--equal-budget-seqs``
whole BF16 requests: ``bench.engine_decode``'s equal-budget measurement) depends on the shared
machine's load as much as on the code, so one run of each tree cannot say whether a change moved
it. Here every round runs, for each tree in turn, one fresh process that measures, one torch
thread, interleaving the dtypes:

- end to end: output tokens per CPU-second serving the 64 requests with BF16 KV and with FP8 KV
  in that budget (``measure_generate``), and their ratio;
- decode only: CPU ms per decode step at the BF16 batch (BF16 KV) and at twice it (FP8 KV),
  without a budget limit (``measure_decode``), and ``2 x step(BF16) / step(FP8)``, the ratio
  decoding alone would give.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.equal_budget_ab --base <dir> --rounds 3

Both trees must have ``bench/engine_decode.py`` with ``measure_generate`` and ``measure_decode``.
Writes ``bench/results/equal_budget_ab.json`` (medians of the per-round ratios, every round).
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
from bench.engine_decode import PROMPT_LEN, _build, measure_decode, measure_generate
from ember.models.kv.spec import kv_layout_for
torch.set_num_threads(1); torch.manual_seed(0)
arch, seqs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model, config = _build(arch, torch.bfloat16)
budget = seqs * (PROMPT_LEN + 128) * kv_layout_for(config, "bf16").cell_size
out = {}
for kv in ("bf16", "fp8_e4m3"):
    stats = {}
    _, cpu = measure_generate(model, config, "bf16", kv, 64, 128, budget, stats)
    out[kv + "_tokens_per_cpu_s"] = cpu
    out[kv + "_steps"] = stats["steps"]
    out[kv + "_preemptions"] = stats["preemptions"]
for kv, batch in (("bf16", seqs), ("fp8_e4m3", 2 * seqs)):
    out[kv + "_decode_cpu_ms"] = measure_decode(
        model, config, "bf16", kv, "off", batch, steps)["cpu_ms_per_step"]
out["end_to_end_ratio"] = out["fp8_e4m3_tokens_per_cpu_s"] / out["bf16_tokens_per_cpu_s"]
out["decode_ratio"] = 2 * out["bf16_decode_cpu_ms"] / out["fp8_e4m3_decode_cpu_ms"]
print(json.dumps(out))
"""


def _measure(tree: Path, arch: str, seqs: int, steps: int) -> dict[str, float]:
    return run_in_tree(tree, _ONE, arch, str(seqs), str(steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other ember checkout")
    parser.add_argument("--arch", nargs="+", default=["kimi", "glm4", "glmdsa"])
    parser.add_argument("--equal-budget-seqs", type=int, default=32)
    parser.add_argument("--steps", type=int, default=24, help="decode steps timed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="bench/results/equal_budget_ab.json")
    args = parser.parse_args()
    trees = {"base": Path(args.base).resolve(), "this": Path.cwd().resolve()}
    runs: dict[str, list[dict]] = {}
    load_start = list(os.getloadavg())
    for round_index in range(args.rounds):
        order = list(trees.items())
        if round_index % 2:
            order.reverse()  # neither tree always runs first
        for arch in args.arch:
            for name, tree in order:
                result = _measure(tree, arch, args.equal_budget_seqs, args.steps)
                result["load_average"] = list(os.getloadavg())
                runs.setdefault(f"{arch}/{name}", []).append(result)
                print(round_index, arch, name, json.dumps(result), flush=True)
    rows = []
    for arch in args.arch:
        row: dict = {"arch": arch}
        for name in trees:
            found = runs[f"{arch}/{name}"]
            for key in found[0]:
                if key != "load_average":
                    row[f"{name}_{key}"] = statistics.median(r[key] for r in found)
        rows.append(row)
        print(
            f"{arch}: end to end {row['base_end_to_end_ratio']:.3f} -> "
            f"{row['this_end_to_end_ratio']:.3f}, decode {row['base_decode_ratio']:.3f} -> "
            f"{row['this_decode_ratio']:.3f}"
        )
    report = {
        "benchmark": "equal_budget_ab",
        "rounds": args.rounds,
        "equal_budget_seqs": args.equal_budget_seqs,
        "decode_steps": args.steps,
        "load_average_start": load_start,
        "load_average_end": list(os.getloadavg()),
        "rows": rows,
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
