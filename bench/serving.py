"""Serving benchmark: ember's model server over HTTP, against itself in other settings and
against HF transformers served naively and in static batches, in the manner of SGLang's
``bench_serving`` (closed-loop clients, fixed input and output lengths, greedy, streaming).

For each architecture it starts each server as a subprocess on 127.0.0.1, waits for /health,
runs the same client (``serving_client``) at each concurrency, reads the server's /metrics and
/server_info, and stops it. All comparisons in one invocation use the same client, prompts,
stream setting and KV byte budget, so ratios are measured within one run.

The KV budget is chosen so that BF16 KV limits the batch: it holds ``--kv-limited-batch``
requests of ``input + output`` tokens (plus one page) in BF16, so at 64 concurrent requests BF16
KV holds only that many whole requests (the scheduler admits by free pages, so a few more start
and are preempted when their pages run out) while FP8 holds twice as many tokens in the same
bytes. The running batch is sampled from the server's /metrics once a second during each run.

Servers (``--servers``): ``bf16`` / ``fp8`` (KV dtype, integrity off), ``fp8-sampled`` /
``fp8-full`` (integrity), ``int4-fp8`` (INT4 routed experts + FP8 KV), ``hf-naive`` /
``hf-static`` (bench/hf_server.py). Concurrency sweeps apply to ``bf16`` and ``fp8``; the others
run at the highest concurrency only.

    PYTHONPATH=. python -m bench.serving --arch kimi glm4moe glmdsa
    PYTHONPATH=. python -m bench.serving --arch kimi --servers bf16 fp8 --concurrency 64

With ``--repeats N`` the servers run N rounds in alternating order (the machine is shared; take
medians); ``--once`` names servers that run in the first round only. ``--append`` adds the
architectures run now to an earlier ``--out`` of the same plan. Results:
``bench/results/serving.json``; plots: ``bench.plot_serving``; tables: ``bench.summarize_serving``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.serving_client import run_closed_loop, summarize
from bench.serving_probe import (
    batch_summary,
    counter_delta,
    cpu_model,
    cpu_seconds,
    free_port,
    load_average,
    measured_run,
    server_figures,
    thread_cpu_seconds,
)

REPO = Path(__file__).resolve().parents[1]
ARCHS = {"kimi": "kimi-tiny", "glm4moe": "glm4moe-tiny", "glmdsa": "glmdsa-tiny"}
EMBER_SERVERS = {
    "bf16": ["--kv-cache-dtype", "bf16", "--integrity", "off"],
    "fp8": ["--kv-cache-dtype", "fp8_e4m3", "--integrity", "off"],
    "fp8-sampled": ["--kv-cache-dtype", "fp8_e4m3", "--integrity", "sampled"],
    "fp8-full": ["--kv-cache-dtype", "fp8_e4m3", "--integrity", "full"],
    "bf16-sampled": ["--kv-cache-dtype", "bf16", "--integrity", "sampled"],
    "int4-fp8": ["--kv-cache-dtype", "fp8_e4m3", "--integrity", "off", "--quantization", "int4"],
}
HF_SERVERS = {"hf-naive": "naive", "hf-static": "static"}
SWEPT = ("bf16", "fp8")


@dataclass(frozen=True)
class Plan:
    concurrency: list[int]
    input_len: int
    output_len: int
    waves: float
    threads: int
    kv_limited_batch: int
    page_size: int
    stream: bool
    hf_naive_requests: int
    device: str = "cpu"  # the ember servers' --device (HF baselines run on the CPU)


def checkpoint(name: str, scratch: Path) -> tuple[Path, bool]:
    """The shipped checkpoint if built (trained), else a random-init stand-in of the same shape."""
    from ember.models.catalog import SHIPPED_CHECKPOINTS
    from tests.models.server.checkpoints import checkpoint_dir

    path = checkpoint_dir(name, scratch)
    return path, path.parent == SHIPPED_CHECKPOINTS


def prompts_for(directory: Path, count: int, length: int, seed: int = 0) -> list[list[int]]:
    """Distinct ``length``-token windows of the committed held-out text (no shared prefixes)."""
    from ember.models.tokenizer import Tokenizer
    from ember.models.training.pipeline import heldout_files

    tokenizer = Tokenizer.from_dir(directory)
    ids: list[int] = []
    for source in heldout_files():
        ids += tokenizer.encode(source.text, allow_special=False)
        if len(ids) > count * length * 3:
            break
    rng = random.Random(seed)
    starts = rng.sample(range(0, len(ids) - length, length), count)
    return [ids[s : s + length] for s in starts]


def kv_budget(directory: Path, plan: Plan) -> dict:
    from ember.models.config_parse import load_config
    from ember.models.kv.spec import kv_capacity, kv_layout_for

    config = load_config(directory)
    per_request = -(-(plan.input_len + plan.output_len) // plan.page_size)  # pages
    pages = plan.kv_limited_batch * per_request + 1
    bf16 = kv_layout_for(config, "bf16")
    budget = pages * plan.page_size * bf16.cell_size
    out = {"budget_bytes": budget, "pages_per_request": per_request}
    for dtype in ("bf16", "fp8_e4m3"):
        spec = kv_layout_for(config, dtype)
        cap = kv_capacity(spec, budget, plan.page_size)
        out[dtype] = {
            "bytes_per_token": spec.cell_size,
            "capacity_tokens": cap.num_pages * plan.page_size,
            "kv_limited_batch": cap.num_pages // per_request,
        }
    out["fp8_over_bf16_capacity"] = (
        out["fp8_e4m3"]["capacity_tokens"] / out["bf16"]["capacity_tokens"]
    )
    return out


def start_server(
    kind: str, directory: Path, port: int, plan: Plan, budget: int
) -> subprocess.Popen:
    # The checkout first, then what the caller had (a GPU machine's carried wheels).
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS=str(plan.threads))
    if kind in HF_SERVERS:
        command = [
            sys.executable,
            "-m",
            "bench.hf_server",
            str(directory),
            "--port",
            str(port),
            "--mode",
            HF_SERVERS[kind],
            "--threads",
            str(plan.threads),
            "--batch-size",
            str(max(plan.concurrency)),
        ]
    else:
        command = [
            sys.executable, "-m", "ember", "models", "serve", str(directory),
            "--port", str(port), "--served-model-name", "bench",
            "--kv-cache-bytes", str(budget), "--page-size", str(plan.page_size),
            "--max-running-requests", str(max(plan.concurrency)),
            "--chunked-prefill-size", str(max(1024, max(plan.concurrency))),
            "--torch-threads", str(plan.threads), "--device", plan.device,
            *EMBER_SERVERS[kind],
        ]  # fmt: skip
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
    process.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{kind} exited: {log.read().decode(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"{kind} did not become healthy")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_server(
    kind: str, directory: Path, prompts: list[list[int]], plan: Plan, budget: int
) -> list[dict]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_server(kind, directory, port, plan, budget)
    rows = []
    try:
        levels = plan.concurrency if kind in SWEPT else [max(plan.concurrency)]
        # Warm-up: two requests, not measured.
        asyncio.run(
            run_closed_loop(url, prompts, model="bench", max_tokens=8, concurrency=2,
                            num_requests=2, stream=plan.stream)
        )  # fmt: skip
        for concurrency in levels:
            requests = max(int(concurrency * plan.waves), 4)
            if kind == "hf-naive":
                requests = min(requests, plan.hf_naive_requests)
            before = load_average()
            started = time.time()
            server_cpu, client_cpu = cpu_seconds(process.pid), time.process_time()
            threads = thread_cpu_seconds(process.pid)
            figures_before = server_figures(url)
            run, running = asyncio.run(
                measured_run(
                    url, prompts, max_tokens=plan.output_len, concurrency=concurrency,
                    num_requests=requests, stream=plan.stream, poll=kind not in HF_SERVERS,
                )
            )  # fmt: skip
            row = {"server": kind, **summarize(run), "started": started}
            # The batch the engine really ran: BF16 KV at 64 concurrent runs only as many as its
            # pages hold, and the roofline must be drawn at that batch, not at the concurrency.
            row["running_batch"] = batch_summary(running)
            # CPU time is far steadier than wall time on a shared machine: tokens per CPU second
            # compare the servers' efficiency whatever else the cores were doing.
            row["server_cpu_s"] = cpu_seconds(process.pid) - server_cpu
            row["client_cpu_s"] = time.process_time() - client_cpu
            row["output_tokens_per_server_cpu_s"] = row["output_tokens"] / row["server_cpu_s"]
            after = thread_cpu_seconds(process.pid)
            row["server_cpu_s_by_thread"] = {
                name: round(after[name] - threads[name], 2) for name in after
            }
            row["load_before"], row["load_after"] = before, load_average()
            row["server_figures"] = server_figures(url)
            # The server's counters run over its whole life (every concurrency): keep this run's.
            row["preemptions"] = counter_delta(figures_before, row["server_figures"], "preemptions")
            # The checker's own CPU (engine thread) against the whole server's: the integrity
            # cost serving pays, prefills and batch changes included, which the wall-clock
            # difference between servers is far too noisy to show.
            checker_s = counter_delta(figures_before, row["server_figures"], "integrity_cpu_s")
            if checker_s is not None:
                row["integrity_cpu_share"] = checker_s / row["server_cpu_s"]
            rows.append(row)
            print(
                f"  {kind:<12} C={concurrency:<3} {row['output_tokens_per_s']:8.1f} out tok/s  "
                f"TTFT p50 {row['ttft_ms']['p50']:8.1f} ms  "
                f"ITL p50 {row['itl_ms']['p50']:7.1f} ms  "
                f"E2E p99 {row['e2e_ms']['p99']:8.1f} ms  failed {row['failed']}  "
                f"{row['output_tokens_per_server_cpu_s']:7.1f} tok/CPU-s  "
                f"load {row['load_after'][0]}"
                + (
                    f"  checker {100 * row['integrity_cpu_share']:.2f}% of server CPU"
                    if row.get("integrity_cpu_share")
                    else ""
                ),
                flush=True,
            )
    finally:
        stop_server(process)
    return rows


def merge_into(previous: dict, report: dict) -> dict:
    """``report`` (no archs yet) on top of an earlier one with the same plan: the earlier
    architectures are kept, with the machine figures of the run that measured them."""
    if previous.get("plan") != report["plan"]:
        raise SystemExit(f"--append: the plan differs from {previous.get('plan')}")
    earlier = previous.get("earlier_runs", []) + [
        previous["machine"] | {"archs": list(previous["archs"])}
    ]
    return report | {"archs": dict(previous["archs"]), "earlier_runs": earlier}


def combine(reports: list[dict]) -> dict:
    """Serving reports of the same plan (architectures run separately, e.g. side by side) as
    one: every architecture, and the machine figures of each run that measured them."""
    out = dict(reports[0]) | {"archs": {}, "combined_from": []}
    for report in reports:
        if report["plan"] != out["plan"]:
            raise SystemExit(f"--combine: plans differ: {report['plan']} vs {out['plan']}")
        out["archs"].update(report["archs"])
        out["combined_from"] += report.get("earlier_runs", [])
        out["combined_from"].append(report["machine"] | {"archs": list(report["archs"])})
    out.pop("earlier_runs", None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", nargs="+", default=list(ARCHS), choices=ARCHS)
    parser.add_argument(
        "--servers",
        nargs="+",
        default=["bf16", "fp8", "fp8-sampled", "fp8-full", "int4-fp8", "hf-static", "hf-naive"],
        choices=[*EMBER_SERVERS, *HF_SERVERS],
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16, 64])
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--waves", type=float, default=2.0, help="requests = waves x concurrency")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per server")
    parser.add_argument("--kv-limited-batch", type=int, default=32)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--hf-naive-requests", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="rounds over the servers")
    parser.add_argument(
        "--once",
        nargs="*",
        default=[],
        help="servers that run in the first round only (the slow ones a goal clears by far)",
    )
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument(
        "--device", default="cpu", help="the ember servers' --device (cuda:N on a GPU machine)"
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "serving.json"))
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the other architectures already in --out (same plan required): one arch can "
        "be rerun, or run later, without rerunning the rest",
    )
    parser.add_argument(
        "--combine",
        nargs="+",
        metavar="JSON",
        help="run nothing: write the architectures of these serving.json files (same plan) "
        "to --out",
    )
    args = parser.parse_args()
    if args.combine:
        combined = combine([json.loads(Path(path).read_text()) for path in args.combine])
        Path(args.out).write_text(json.dumps(combined, indent=2) + "\n")
        print(f"wrote {args.out}: {', '.join(combined['archs'])}")
        return
    plan = Plan(
        concurrency=sorted(args.concurrency),
        input_len=args.input_len,
        output_len=args.output_len,
        waves=args.waves,
        threads=args.threads,
        kv_limited_batch=args.kv_limited_batch,
        page_size=args.page_size,
        stream=not args.no_stream,
        hf_naive_requests=args.hf_naive_requests,
        device=args.device,
    )
    scratch = Path(tempfile.mkdtemp(prefix="ember-bench-"))
    report: dict = {
        "benchmark": "serving",
        "plan": plan.__dict__,
        "machine": {
            "processor": cpu_model(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_at_start": load_average(),
        },
        "archs": {},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and out.is_file():
        report = merge_into(json.loads(out.read_text()), report)
    for arch in args.arch:
        directory, trained = checkpoint(ARCHS[arch], scratch)
        budget = kv_budget(directory, plan)
        prompts = prompts_for(directory, 256, plan.input_len)
        print(
            f"{arch}: {'trained' if trained else 'random-init'} checkpoint, KV budget "
            f"{budget['budget_bytes']:,} B (BF16 batch {budget['bf16']['kv_limited_batch']}, "
            f"FP8 batch {budget['fp8_e4m3']['kv_limited_batch']})",
            flush=True,
        )
        rows = []
        for repeat in range(args.repeats):
            # Alternate the order so slow drifts in the machine's load hit every server alike.
            order = args.servers if repeat % 2 == 0 else list(reversed(args.servers))
            if repeat:
                order = [kind for kind in order if kind not in args.once]
            for kind in order:
                for row in run_server(kind, directory, prompts, plan, budget["budget_bytes"]):
                    rows.append(row | {"repeat": repeat})
        report["archs"][arch] = {
            "checkpoint": ARCHS[arch],
            "trained_weights": trained,
            "kv": budget,
            "runs": rows,
        }
        report["machine"]["load_at_end"] = load_average()
        out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
