"""Markdown tables and goal ratios from ``bench/results/serving.json`` (medians over repeats).

PYTHONPATH=. python -m bench.summarize_serving [serving.json] [--accuracy serving_accuracy.json]
    [--roofline roofline.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent / "results" / "serving.json"
GOALS = (
    # (label, numerator server, denominator server, goal)
    ("FP8 KV / BF16 KV throughput", "fp8", "bf16", 1.6),
    ("ember FP8 / HF naive", "fp8", "hf-naive", 10.0),
    ("ember BF16 / HF naive", "bf16", "hf-naive", 10.0),
    ("ember FP8 / HF static batch", "fp8", "hf-static", 2.0),
    ("ember BF16 / HF static batch", "bf16", "hf-static", 2.0),
    ("INT4+FP8 KV / FP8 KV", "int4-fp8", "fp8", None),
)


def medians(runs: list[dict]) -> dict[tuple[str, int], dict]:
    """(server, concurrency) -> median figures over repeats (and how many runs)."""
    groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for row in runs:
        groups[(row["server"], row["concurrency"])].append(row)
    out = {}
    for key, rows in groups.items():
        out[key] = {
            "runs": len(rows),
            "tok_s": statistics.median(r["output_tokens_per_s"] for r in rows),
            "tok_s_all": [round(r["output_tokens_per_s"], 1) for r in rows],
            "tok_cpu": statistics.median(r.get("output_tokens_per_server_cpu_s", 0) for r in rows),
            **{
                f"{metric}_{q}": statistics.median(r[f"{metric}_ms"][q] for r in rows)
                for metric in ("ttft", "itl", "e2e")
                for q in ("p50", "p99")
            },
            "preemptions": statistics.median(_preemptions(r) for r in rows),
            "running_batch": _median_or_none(
                [(r.get("running_batch") or {}).get("median") for r in rows]
            ),
            "load": statistics.median(r["load_after"][0] for r in rows),
            "failed": sum(r["failed"] for r in rows),
        }
    return out


def _preemptions(row: dict) -> float:
    """This run's preemptions (older results kept only the server's running total)."""
    if row.get("preemptions") is not None:
        return row["preemptions"]
    return (row.get("server_figures") or {}).get("preemptions") or 0


def _median_or_none(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("serving", nargs="?", default=str(DEFAULT))
    parser.add_argument("--accuracy", default=str(DEFAULT.with_name("serving_accuracy.json")))
    parser.add_argument("--roofline", default=str(DEFAULT.with_name("roofline.json")))
    args = parser.parse_args()
    serving = json.loads(Path(args.serving).read_text())
    accuracy_path = Path(args.accuracy)
    accuracy = json.loads(accuracy_path.read_text()) if accuracy_path.is_file() else None
    print("\n".join(goals_table(serving, accuracy)))
    serving_tables(serving)
    for path, tables in ((args.accuracy, accuracy_tables), (args.roofline, roofline_table)):
        if Path(path).is_file():
            print("\n".join(tables(json.loads(Path(path).read_text()))))


def _verdict(value: float, goal: float, higher_is_better: bool = True) -> str:
    met = value >= goal if higher_is_better else value <= goal
    return "met" if met else "**missed**"


def goals_table(serving: dict, accuracy: dict | None) -> list[str]:
    """One row per goal of the issue, one column per architecture: the measured figure and
    whether it meets the goal (throughput ratios by wall time and per server CPU-second)."""
    archs = list(serving["archs"])
    if accuracy is not None:
        archs += [a for a in accuracy["archs"] if a not in archs]
    top = max(serving["plan"]["concurrency"])
    rows: dict[str, dict[str, str]] = defaultdict(dict)
    for arch, entry in serving["archs"].items():
        ratio = entry["kv"]["fp8_over_bf16_capacity"]
        rows["KV tokens FP8 / BF16 at equal bytes (>= 1.99x)"][arch] = (
            f"{ratio:.3f}x {_verdict(ratio, 1.99)}"
        )
        table = medians(entry["runs"])
        for ratio_row in goal_ratios(table, top):
            if ratio_row["goal"] is None:
                continue
            wall, cpu = ratio_row["ratio"], ratio_row["cpu_ratio"]
            label = f"{ratio_row['label']} at {top} (>= {ratio_row['goal']:g}x): wall; per CPU-s"
            rows[label][arch] = (
                f"{wall:.3f}x {_verdict(wall, ratio_row['goal'])}; "
                f"{cpu:.3f}x {_verdict(cpu, ratio_row['goal'])}"
            )
        for cost in integrity_costs(table, top):
            if cost["mode"] != "sampled":
                continue
            # A cost is a negative change: the goal is a throughput change of -1% or better.
            wall, cpu = cost["throughput_change"], cost["cpu_change"]
            rows["sampled integrity: throughput change (> -1%): wall; per CPU-s"][arch] = (
                f"{wall:+.1%} {_verdict(wall, -0.01)}; {cpu:+.1%} {_verdict(cpu, -0.01)}"
            )
    for arch, entry in (accuracy or {}).get("archs", {}).items():
        configs = entry["configs"]
        for name, label, goal in (
            ("fp8_kv", "FP8 KV bits per byte vs BF16 (within 0.5%)", 0.005),
            ("int4", "INT4 experts bits per byte vs BF16 (within 2%)", 0.02),
        ):
            change = configs[name]["bpb_change_vs_bf16"]
            rows[label][arch] = f"{change:+.3%} {_verdict(abs(change), goal, False)}"
    lines = ["| goal | " + " | ".join(archs) + " |", "|---|" + "---:|" * len(archs)]
    for label, cells in rows.items():
        lines.append(f"| {label} | " + " | ".join(cells.get(a, "-") for a in archs) + " |")
    return lines


def accuracy_tables(report: dict) -> list[str]:
    """Weight bytes, KV capacity, and bits per byte / greedy agreement per configuration."""
    lines = [
        "\n| model | BF16 weight bytes | FP8 experts | INT4 experts | FP8 all linear "
        "| INT4 all linear | KV tokens FP8/BF16 (5 MiB; 1 GiB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in report["archs"].values():
        w = entry["weight_bytes"]
        caps = "; ".join(f"{row['fp8_over_bf16']:.4f}x" for row in entry["kv_capacity"])
        lines.append(
            f"| {entry['checkpoint']} | {w['bf16']:,} "
            + " ".join(
                f"| {w[key]:,} ({w[key + '_vs_bf16']:.2f})"
                for key in ("fp8_experts", "int4_experts", "fp8_all", "int4_all")
            )
            + f" | {caps} |"
        )
    lines += [
        "\n| model | config | weights | KV | bits per byte | vs BF16 | greedy positions equal "
        "| sequences identical | mean common prefix |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for entry in report["archs"].values():
        for name, row in entry["configs"].items():
            agree = row["greedy_agreement"]
            lines.append(
                f"| {entry['checkpoint']} | {name} | {row['weights']} | {row['kv_cache_dtype']} "
                f"| {row['bits_per_byte']:.4f} | {row['bpb_change_vs_bf16']:+.3%} "
                f"| {agree['positions_equal']:.1%} | {agree['sequences_identical']:.0%} "
                f"| {agree['mean_common_prefix']:.1f} |"
            )
    return lines


def roofline_table(report: dict) -> list[str]:
    bw = report["bandwidth"]
    lines = [
        f"\nBandwidth ({report['threads']} thread, load {report['load'][0]}): "
        + ", ".join(
            f"{where} copy {f['copy_gb_s']:.1f} GB/s, triad {f['triad_gb_s']:.1f} GB/s"
            for where, f in bw.items()
        ),
        "\n| model | server | C | running batch | MB per step | roofline tok/s (DRAM; cache) "
        "| ember decode tok/s | fraction (DRAM; cache) | ember out tok per CPU-s "
        "| fraction (DRAM; cache) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arch, entry in report["archs"].items():
        for row in entry["rows"]:
            got = row.get("ember")
            measured = (
                f"{got['decode_tokens_per_s']:.0f} | "
                f"{row['fraction_of_dram_1GiB_roofline']:.1%}; "
                f"{row['fraction_of_cache_32MiB_roofline']:.1%} | "
                f"{got['output_tokens_per_server_cpu_s']:.0f} | "
                f"{row['cpu_fraction_of_dram_1GiB_roofline']:.1%}; "
                f"{row['cpu_fraction_of_cache_32MiB_roofline']:.1%}"
                if got
                else "- | - | - | -"
            )
            lines.append(
                f"| {arch} | {row['server']} | {row['concurrency']} | {row['batch']:.0f} "
                f"| {row['bytes_per_step'] / 1e6:.2f} "
                f"| {row['roofline_tok_s_dram_1GiB']:,.0f}; "
                f"{row['roofline_tok_s_cache_32MiB']:,.0f} "
                f"| {measured} |"
            )
    return lines


def serving_tables(report: dict) -> None:
    top = max(report["plan"]["concurrency"])
    for arch, entry in report["archs"].items():
        kv = entry["kv"]
        print(
            f"\n### {arch} ({'trained' if entry['trained_weights'] else 'random-init'} weights)\n"
        )
        print(
            f"KV budget {kv['budget_bytes']:,} B: BF16 {kv['bf16']['capacity_tokens']:,} tokens "
            f"(batch {kv['bf16']['kv_limited_batch']}), FP8 {kv['fp8_e4m3']['capacity_tokens']:,} "
            f"tokens (batch {kv['fp8_e4m3']['kv_limited_batch']}): "
            f"{kv['fp8_over_bf16_capacity']:.3f}x\n"
        )
        table = medians(entry["runs"])
        print(
            "| server | C | running batch | out tok/s (median; runs) | out tok per server CPU-s "
            "| TTFT p50 / p99 ms | ITL p50 / p99 ms | E2E p50 / p99 ms | preemptions | load |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (server, c), m in sorted(table.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            batch = "-" if m["running_batch"] is None else f"{m['running_batch']:.0f}"
            print(
                f"| {server} | {c} | {batch} "
                f"| **{m['tok_s']:.0f}** ({', '.join(map(str, m['tok_s_all']))}) "
                f"| {m['tok_cpu']:.0f} | {m['ttft_p50']:.0f} / {m['ttft_p99']:.0f} "
                f"| {m['itl_p50']:.1f} / {m['itl_p99']:.1f} "
                f"| {m['e2e_p50']:.0f} / {m['e2e_p99']:.0f} "
                f"| {m['preemptions']:.0f} | {m['load']:.1f} |"
            )
        print(f"\nRatios at {top} concurrent (medians):\n")
        for ratio in goal_ratios(table, top):
            goal = ratio["goal"]
            verdict = "" if goal is None else (" (goal met)" if ratio["met"] else " (MISSED)")
            goal_text = "" if goal is None else f", goal >= {goal}x"
            print(
                f"- {ratio['label']}: **{ratio['ratio']:.2f}x** out tok/s{goal_text}{verdict}; "
                f"{ratio['cpu_ratio']:.2f}x per server CPU second"
            )
        for row in integrity_costs(table, top):
            print(
                f"- integrity {row['mode']} vs off (FP8 KV): throughput "
                f"{row['throughput_change']:+.1%} (per server CPU second "
                f"{row['cpu_change']:+.1%}), E2E p99 {row['e2e_p99_change']:+.1%}, ITL p50 "
                f"{row['itl_p50_change']:+.1%} (goal for sampled: within 1%)"
            )


def goal_ratios(table: dict[tuple[str, int], dict], top: int) -> list[dict]:
    """The GOALS ratios at concurrency ``top`` (median tok/s over median tok/s), for the pairs
    both measured."""
    out = []
    for label, num, den, goal in GOALS:
        a, b = table.get((num, top)), table.get((den, top))
        if not (a and b):
            continue
        ratio = a["tok_s"] / b["tok_s"]
        out.append(
            {
                "label": label,
                "ratio": ratio,
                "cpu_ratio": a["tok_cpu"] / b["tok_cpu"] if b["tok_cpu"] else float("nan"),
                "goal": goal,
                "met": None if goal is None else ratio >= goal,
            }
        )
    return out


def integrity_costs(table: dict[tuple[str, int], dict], top: int) -> list[dict]:
    """Sampled and full integrity checking against off (FP8 KV) at ``top``: relative changes
    (negative throughput change = slower)."""
    off = table.get(("fp8", top))
    out = []
    for mode in ("sampled", "full"):
        on = table.get((f"fp8-{mode}", top))
        if not (off and on):
            continue
        out.append(
            {
                "mode": mode,
                "throughput_change": on["tok_s"] / off["tok_s"] - 1,
                "cpu_change": on["tok_cpu"] / off["tok_cpu"] - 1
                if off["tok_cpu"]
                else float("nan"),
                "e2e_p99_change": on["e2e_p99"] / off["e2e_p99"] - 1,
                "itl_p50_change": on["itl_p50"] / off["itl_p50"] - 1,
            }
        )
    return out


if __name__ == "__main__":
    main()
