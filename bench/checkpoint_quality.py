"""Shipped checkpoints: held-out bits per byte against a byte-unigram baseline, size, training cost.

For every checkpoint built under ember/models/checkpoints, ``assess.evaluate_checkpoint`` scores
the committed held-out files (``stdlib-heldout.json``, never trained on) with 512-token windows
moving 256 tokens at a time, so every token is predicted once from at least 256 tokens of
context; the sum of -log2 p over the text tokens is divided by the files' UTF-8 byte count. The
baseline is ``evaluate.byte_unigram_baseline``'s ``train_fitted_bits_per_byte``: a byte-frequency
table fitted on the training files (add-one smoothing) scored on the same held-out bytes. The
held-out set's own byte entropy (the best any context-free byte model could do on it, fitted on
the test bytes themselves) is reported next to it. Size is the checkpoint directory in MB
(10^6 bytes); training CPU and wall seconds come from ``bench/results/training-NAME.json``. The
greedy chat samples are the fixed held-out docstring requests of ``assess.sample_requests``.

    python -m bench.checkpoint_quality [NAME ...] [--out bench/results/checkpoint_quality.json]
        [--plot bench/results/checkpoint-training.png] [--max-bytes N] [--no-samples]
"""

from __future__ import annotations

import os

# OpenMP threads that spin while waiting burn the shared cores for nothing (see
# ember/models/training/__main__.py); must be set before torch loads its OpenMP runtime.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
MB = 1_000_000


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def training_record(name: str, results: pathlib.Path = RESULTS) -> dict[str, Any] | None:
    path = results / f"training-{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def checkpoint_size(directory: pathlib.Path) -> dict[str, int]:
    files = [p for p in directory.iterdir() if p.is_file()]
    return {
        "total_bytes": sum(p.stat().st_size for p in files),
        "weights_bytes": sum(p.stat().st_size for p in files if p.suffix == ".safetensors"),
    }


def summarize(
    evaluation: dict[str, Any], size: dict[str, int], record: dict[str, Any] | None
) -> dict[str, Any]:
    """One checkpoint's row: evaluation, size and the training record's cost figures."""
    bpb = evaluation["heldout"]["bits_per_byte"]
    baseline = evaluation["byte_unigram_baseline"]
    row: dict[str, Any] = {
        "checkpoint": evaluation["checkpoint"],
        "heldout_bits_per_byte": bpb,
        "baseline_bits_per_byte": baseline["train_fitted_bits_per_byte"],
        "heldout_byte_entropy": baseline["heldout_entropy_bits_per_byte"],
        "ratio_to_baseline": bpb / baseline["train_fitted_bits_per_byte"],
        "size_mb": size["total_bytes"] / MB,
        "weights_mb": size["weights_bytes"] / MB,
        "size": size,
        "evaluation": evaluation,
    }
    if record is not None:
        row["training"] = {
            key: record[key]
            for key in (
                "parameters",
                "tokens_trained",
                "cpu_s",
                "wall_s",
                "final_train_loss",
                "environment_before",
                "environment_after",
            )
        }
    return row


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| checkpoint | params | size MB | held-out bits/byte | byte-unigram baseline | ratio "
        "| chat-answer bits/byte | train CPU s | train wall s | final train loss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t = r.get("training") or {}
        chat = r["evaluation"].get("heldout_chat_answers", {}).get("bits_per_byte")
        lines.append(
            f"| {r['checkpoint']} | {t.get('parameters', 0) / 1e6:.1f} M | {r['size_mb']:.1f} "
            f"| {r['heldout_bits_per_byte']:.3f} | {r['baseline_bits_per_byte']:.3f} "
            f"| {r['ratio_to_baseline']:.2f} | {'-' if chat is None else f'{chat:.3f}'} "
            f"| {t.get('cpu_s', float('nan')):,.0f} | {t.get('wall_s', float('nan')):,.0f} "
            f"| {t.get('final_train_loss', float('nan')):.3f} |"
        )
    return "\n".join(lines)


def plot(names: list[str], path: str, results: pathlib.Path = RESULTS) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = {n: r for n in names if (r := training_record(n, results)) is not None}
    dsa = {n: r for n, r in records.items() if any(r["indexer_kl_every_10_steps"])}
    fig, axes = plt.subplots(1, 2 if dsa else 1, figsize=(10 if dsa else 6, 3.8), squeeze=False)
    loss_ax = axes[0][0]
    for name, r in records.items():
        every = 10  # the records keep every 10th step's loss, starting at step 1
        losses = r["loss_every_10_steps"]
        loss_ax.plot([1 + every * i for i in range(len(losses))], losses, label=name)
    loss_ax.set_xlabel("training step (8 x 512 tokens)")
    loss_ax.set_ylabel("training loss (nats/token)")
    loss_ax.set_title("Training loss of the shipped checkpoints")
    loss_ax.legend(fontsize=8)
    loss_ax.grid(alpha=0.3)
    for name, r in dsa.items():
        kl_ax = axes[0][1]
        kls = r["indexer_kl_every_10_steps"]
        kl_ax.plot([1 + 10 * i for i in range(len(kls))], kls, label=name)
        warmup = r["settings"].get("dense_warmup_steps", 0)
        if warmup:
            kl_ax.axvline(warmup, color="grey", linestyle="--", label="end of dense warmup")
        kl_ax.set_xlabel("training step")
        kl_ax.set_ylabel("indexer KL to dense attention")
        kl_ax.set_yscale("log")
        kl_ax.set_title("DSA indexer imitation loss")
        kl_ax.legend(fontsize=8)
        kl_ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="checkpoints (default: every built one)")
    parser.add_argument("--out", default=str(RESULTS / "checkpoint_quality.json"))
    parser.add_argument("--plot", default=None, help="draw the training loss curves here")
    parser.add_argument("--max-bytes", type=int, help="score only a prefix of the held-out set")
    parser.add_argument("--no-samples", action="store_true", help="skip the greedy chat samples")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--keep-others",
        action="store_true",
        help="keep --out's rows of checkpoints not named here (evaluate one checkpoint at a time)",
    )
    args = parser.parse_args(argv)

    import torch

    from ember.models.training.assess import evaluate_checkpoint
    from ember.models.training.pipeline import shipped_dir, specs

    torch.set_num_threads(args.threads)
    names = args.names or [n for n in specs() if (shipped_dir(n) / "config.json").is_file()]
    out = pathlib.Path(args.out)
    kept = []
    if args.keep_others and out.is_file():
        previous = json.loads(out.read_text(encoding="utf-8"))
        if previous.get("max_bytes") != args.max_bytes:
            parser.error(f"{out} was measured with --max-bytes {previous.get('max_bytes')}")
        kept = [r for r in previous["checkpoints"] if r["checkpoint"] not in names]
    rows = []
    for name in names:
        load_before, cpu_before = os.getloadavg(), _cpu_seconds()
        evaluation = evaluate_checkpoint(
            name, max_bytes=args.max_bytes, samples=not args.no_samples
        )
        row = summarize(evaluation, checkpoint_size(shipped_dir(name)), training_record(name))
        row["machine"] = {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "threads": args.threads,
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "eval_cpu_s": _cpu_seconds() - cpu_before,
        }
        rows.append(row)
        print(
            f"{name}: held-out {row['heldout_bits_per_byte']:.3f} bits/byte vs byte-unigram "
            f"{row['baseline_bits_per_byte']:.3f} ({row['ratio_to_baseline']:.2f}x), "
            f"{row['size_mb']:.1f} MB, eval {evaluation['eval_wall_s']:.0f} s",
            flush=True,
        )
        for sample in evaluation.get("samples", [])[:1]:
            print(f"  {sample['messages'][-1]['content']!r}\n  -> {sample['output']!r}")
    order = list(specs())
    rows = sorted(kept + rows, key=lambda r: order.index(r["checkpoint"]))
    results = {
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
        "max_bytes": args.max_bytes,
        "not_built": [n for n in order if n not in {r["checkpoint"] for r in rows}],
        "checkpoints": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown_table(rows))
    if args.plot:
        plot(list(specs()), args.plot)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
