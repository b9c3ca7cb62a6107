"""Plots for the serving benchmark (matplotlib, the ``bench`` extra).

    PYTHONPATH=. python -m bench.plot_serving [bench/results/serving.json]

Writes ``serving_throughput.png`` (output tokens/s against concurrency for BF16 and FP8 KV, and
every server at the highest concurrency, by wall time and per server CPU-second) and
``serving_latency.png`` (TTFT, ITL and E2E p50/p99 at the highest concurrency) next to the JSON;
medians over repeats.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.summarize_serving import medians

DEFAULT = Path(__file__).resolve().parent / "results" / "serving.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "report",
        nargs="?",
        type=Path,
        default=DEFAULT,
        help="bench.serving JSON (default: bench/results/serving.json)",
    )
    path = parser.parse_args().report
    # Imported here, after the arguments: matplotlib is the optional ``bench`` extra, and
    # ``--help`` must work without it (tests/bench/test_documented_commands.py).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = json.loads(path.read_text())
    archs = report["archs"]
    top = max(report["plan"]["concurrency"])

    fig, axes = plt.subplots(3, len(archs), figsize=(5 * len(archs), 12), squeeze=False)
    for col, (arch, entry) in enumerate(archs.items()):
        runs = entry["runs"]
        ax = axes[0][col]
        for server in ("bf16", "fp8"):
            points = sorted(
                (c, m["tok_s"]) for (name, c), m in medians(runs).items() if name == server
            )
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=f"ember {server} KV")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel("output tokens/s")
        ax.set_title(f"{arch}: KV-limited batch BF16 {entry['kv']['bf16']['kv_limited_batch']}")
        ax.legend()
        ax = axes[1][col]
        at_top = [(name, m) for (name, c), m in medians(runs).items() if c == top]
        names = [name for name, _ in at_top]
        ax.bar(names, [m["tok_s"] for _, m in at_top])
        for name, m in at_top:  # every repeat, so the spread shows
            ax.scatter([name] * len(m["tok_s_all"]), m["tok_s_all"], color="k", s=12, zorder=3)
        ax.set_ylabel(f"output tokens/s at {top} concurrent")
        ax.tick_params(axis="x", rotation=45)
        # Tokens per server CPU-second: what each server got out of the CPU time it was given,
        # far steadier than wall time on the shared machine.
        ax = axes[2][col]
        ax.bar(names, [m["tok_cpu"] for _, m in at_top], color="tab:green")
        ax.set_ylabel(f"output tokens per server CPU-second at {top}")
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(path.with_name("serving_throughput.png"), dpi=90)

    fig, axes = plt.subplots(1, len(archs), figsize=(5 * len(archs), 4), squeeze=False)
    for col, (arch, entry) in enumerate(archs.items()):
        at_top = [(name, m) for (name, c), m in medians(entry["runs"]).items() if c == top]
        names = [name for name, _ in at_top]
        ax = axes[0][col]
        for offset, (metric, label) in enumerate(
            (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E"))
        ):
            xs = [i + offset * 0.27 for i in range(len(names))]
            ax.bar(xs, [m[f"{metric}_p50"] for _, m in at_top], width=0.25, label=f"{label} p50")
            ax.scatter(xs, [m[f"{metric}_p99"] for _, m in at_top], marker="_", s=200, color="k")
        ax.set_yscale("log")
        ax.set_xticks([i + 0.27 for i in range(len(names))], names, rotation=45)
        ax.set_ylabel(f"ms at {top} concurrent (bars p50, ticks p99)")
        ax.set_title(arch)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path.with_name("serving_latency.png"), dpi=90)
    print(f"wrote {path.with_name('serving_throughput.png')} and serving_latency.png")


if __name__ == "__main__":
    main()
