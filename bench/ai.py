"""AI path benchmark: what ``env.AI.run`` costs on top of the model server, pool scaling, and
recovery from a replica killed mid-stream.

    PYTHONPATH=. python bench/ai.py [--rounds 3] [--max-tokens 32] [--sections overhead,scaling]

1. **overhead**: one model server (``ember models serve``, a subprocess) and one ``ember dev``
   (a subprocess) whose worker streams ``env.AI.run`` straight back; the pool attaches to that
   same server by URL. At 1, 16 and 64 concurrent streams, the same requests go (a) straight to
   the model server's ``/v1/chat/completions`` and (b) through the handler, in alternating rounds
   (the order flips each round). Per path: completion tokens/s and time to first token. The load
   comes from a bare asyncio client (``bench/raw_http.py``; ``--client httpx`` for the client
   used before 2026-12-04, which spent more CPU per request than ember on this box).
2. **scaling**: a ``ModelPool`` in this process launching 1, then 2 CPU replicas (one torch
   thread each), driven at 16 and 64 concurrent streams.
3. **recovery**: two replicas under a steady load of 4 streams; one replica is SIGKILLed while it
   streams. Measured: kill -> its in-flight request fails; kill -> the replica is ready again;
   requests started meanwhile that failed (the other replica should take them all).

Writes ``bench/results/ai.json`` (and ``ai.png`` with matplotlib). The machine is shared: the
JSON records the load average around each section.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai_load import (  # noqa: E402
    load_average,
    run_phase,
    tree_cpu_seconds,
)
from ember.models.pool.launch import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MODEL = "@cf/zai-org/glm-4.7-flash"
WORKER = """
from workers import Response

async def on_fetch(request, env):
    stream = await env.AI.run("@cf/zai-org/glm-4.7-flash", await request.json())
    return Response(stream, headers={"content-type": "text/event-stream"})
"""
SERVER_ARGS = ["--torch-threads", "1", "--kv-cache-bytes", "256MiB"]


def checkpoint(scratch: Path) -> Path:
    """The shipped glm4moe-tiny if built, else a random-init stand-in of the same config."""
    from ember.models.catalog import SHIPPED_CHECKPOINTS

    shipped = SHIPPED_CHECKPOINTS / "glm4moe-tiny"
    if (shipped / "config.json").is_file():
        return shipped
    from tests.models.server.checkpoints import checkpoint_dir

    return checkpoint_dir("glm4moe-tiny", scratch)


def request_body(max_tokens: int) -> dict:
    return {
        "messages": [{"role": "user", "content": "Write a short Python function."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 1.0,
        "stream": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }


def _wait_http(url: str, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer 200 in {timeout} s")


def _env() -> dict[str, str]:
    # The checkout first, then what the caller had (a GPU machine's carried wheels).
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


def bench_project(work: Path, replica_port: int) -> Path:
    """The benches' worker project: WORKER, its AI binding attached to the replica on the port."""
    project = work / "bench-ai"
    project.mkdir(exist_ok=True)
    (project / "worker.py").write_text(WORKER)
    (project / "ember.yaml").write_text(
        "name: bench-ai\nmain: worker.py\nlimits:\n  cpu_ms: 300000\nai:\n  binding: AI\n"
        f'  models:\n    "{MODEL}":\n      url: http://127.0.0.1:{replica_port}\n'
        "      max_running_requests: 256\n  limits:\n    concurrent_requests: 1024\n"
    )
    return project


def _start_dev(project: Path, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ember", "dev", str(project), "--port", str(port)]
    return subprocess.Popen(
        [*command, "--no-watch"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env()
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def overhead(ckpt: Path, work: Path, args: argparse.Namespace) -> dict:
    server_port, dev_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ember", "models", "serve", str(ckpt), "--port", str(server_port)]
        + ["--served-model-name", MODEL, *args.server_args, "--max-running-requests", "128"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    project = bench_project(work, server_port)
    dev = _start_dev(project, dev_port)
    direct_url = f"http://127.0.0.1:{server_port}/v1/chat/completions"
    runtime_url = f"http://127.0.0.1:{dev_port}/"
    rest_url = f"http://127.0.0.1:{dev_port}/client/v4/accounts/local/ai/run/{MODEL}"
    body = request_body(args.max_tokens)
    direct_body = {**body, "model": MODEL, "stream_options": {"include_usage": True}}
    rows = []
    try:
        _wait_http(f"http://127.0.0.1:{server_port}/health")
        asyncio.run(run_phase(runtime_url, body, 2, 2))  # warm: isolate, pool, connections
        asyncio.run(run_phase(direct_url, direct_body, 2, 2))
        asyncio.run(run_phase(rest_url, body, 2, 2))
        for concurrency in args.concurrency:
            per_worker = max(1, _requests(args, concurrency) // concurrency)
            for round_index in range(args.rounds):
                order = ["direct", "runtime", "rest"]
                if round_index % 2:
                    order.reverse()
                targets = {
                    "direct": (direct_url, direct_body),
                    "runtime": (runtime_url, body),
                    "rest": (rest_url, body),
                }
                for path in order:
                    url, payload = targets[path]
                    cpu = (tree_cpu_seconds(server.pid), tree_cpu_seconds(dev.pid))
                    phase = asyncio.run(
                        run_phase(
                            url,
                            payload,
                            concurrency,
                            per_worker,
                            stagger=args.stagger,
                            client=args.client,
                        )
                    )
                    server_cpu = tree_cpu_seconds(server.pid) - cpu[0]
                    dev_cpu = tree_cpu_seconds(dev.pid) - cpu[1]
                    tokens = sum(t.tokens for t in phase.timings) or 1
                    accounting = {
                        "server_cpu_ms_per_1k_tokens": round(server_cpu / tokens * 1e6, 1),
                        "ember_dev_cpu_ms_per_1k_tokens": round(dev_cpu / tokens * 1e6, 1),
                    }
                    rows.append(
                        {"path": path, "round": round_index, **phase.summary(), **accounting}
                    )
                    print(f"  {path:<8} c={concurrency:<3} {phase.summary()}", flush=True)
    finally:
        _stop(dev)
        _stop(server)
    return {"phases": rows, "compare": _compare(rows, args.concurrency)}


def _requests(args: argparse.Namespace, concurrency: int) -> int:
    """Requests per phase: --requests, or two per stream with at least 16."""
    return args.requests or max(16, 2 * concurrency)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _compare(rows: list[dict], concurrencies: list[int]) -> list[dict]:
    """Per concurrency: medians over rounds, each round's path/direct ratio, CPU per token."""
    out = []
    for concurrency in concurrencies:
        mine = [r for r in rows if r["concurrency"] == concurrency]
        rounds = sorted({r["round"] for r in mine})
        row: dict = {"concurrency": concurrency}
        for path in ("direct", "runtime", "rest"):
            phases = [r for r in mine if r["path"] == path]
            if not phases:
                continue
            row[f"{path}_tokens_per_s"] = round(_median([r["tokens_per_s"] for r in phases]), 2)
            row[f"{path}_ttft_p50_ms"] = round(_median([r["ttft_p50_ms"] for r in phases]), 3)
            row[f"{path}_server_cpu_ms_per_1k"] = _median(
                [r["server_cpu_ms_per_1k_tokens"] for r in phases]
            )
            row[f"{path}_ember_cpu_ms_per_1k"] = _median(
                [r["ember_dev_cpu_ms_per_1k_tokens"] for r in phases]
            )
            if path == "direct":
                continue
            ratios: list[float] = []
            added: dict[str, list[float]] = {"": [], "_burst": [], "_steady": []}
            for index in rounds:
                pair = {r["path"]: r for r in mine if r["round"] == index}
                # A phase whose requests all failed has no rate: it is left out (its errors
                # are in the phases' rows), rather than ending the run.
                if path in pair and "direct" in pair and pair["direct"]["tokens_per_s"] > 0:
                    ratios.append(pair[path]["tokens_per_s"] / pair["direct"]["tokens_per_s"])
                    for kind, values in added.items():
                        mine_ttft = pair[path].get(f"ttft{kind}_p50_ms")
                        direct_ttft = pair["direct"].get(f"ttft{kind}_p50_ms")
                        if mine_ttft is not None and direct_ttft is not None:
                            values.append(mine_ttft - direct_ttft)
            if ratios:
                row[f"{path}_throughput_cost_pct"] = round(100 * (1 - _median(ratios)), 2)
            for kind, values in added.items():
                if values:
                    row[f"{path}_ttft_added{kind}_ms"] = round(_median(values), 3)
            ember = row[f"{path}_ember_cpu_ms_per_1k"]
            server = row[f"{path}_server_cpu_ms_per_1k"]
            if ember + server > 0:
                row[f"{path}_cpu_share_pct"] = round(100 * ember / (ember + server), 2)
        out.append(row)
    return out


def plot(data: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    figure, axes = plt.subplots(1, 3, figsize=(15, 4))
    compare = data.get("overhead", {}).get("compare", [])
    if compare:
        labels = [str(c["concurrency"]) for c in compare]
        xs = range(len(labels))
        paths = (
            (-0.27, "direct", "model server"),
            (0.0, "rest", "REST ai/run"),
            (0.27, "runtime", "handler env.AI.run"),
        )
        for offset, key, name in paths:
            at = [x + offset for x in xs]
            axes[0].bar(at, [c[f"{key}_tokens_per_s"] for c in compare], 0.27, label=name)
            axes[1].bar(at, [c[f"{key}_ttft_p50_ms"] for c in compare], 0.27, label=name)
        axes[1].set_yscale("log")
        for axis, title in ((axes[0], "completion tokens/s"), (axes[1], "TTFT p50 (ms)")):
            axis.set_xticks(list(xs), labels)
            axis.set_xlabel("concurrent streams")
            axis.set_title(title)
            axis.legend()
    scale = data.get("scaling", [])
    if scale:
        for replicas in (1, 2):
            points = {}
            for row in scale:
                if row["replicas"] == replicas:
                    points.setdefault(row["concurrency"], []).append(row["tokens_per_s"])
            xs = sorted(points)
            axes[2].plot(
                xs,
                [sorted(points[x])[len(points[x]) // 2] for x in xs],
                "o-",
                label=f"{replicas} replica(s)",
            )
        axes[2].set_title("pool scaling: tokens/s")
        axes[2].set_xlabel("concurrent streams")
        axes[2].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--requests", type=int, default=0, help="requests per phase (default max(16, 2 x streams))"
    )
    parser.add_argument(
        "--concurrency", type=lambda s: [int(v) for v in s.split(",")], default=[1, 16, 64]
    )
    parser.add_argument("--sections", default="overhead,scaling,recovery")
    parser.add_argument(
        "--server-device",
        default="cpu",
        help="the model servers' --device (cuda:N on a GPU machine; the issue's figures: cpu)",
    )
    parser.add_argument(
        "--stagger",
        action="store_true",
        help="first requests of different lengths, so follow-ups start one by one (steady TTFT)",
    )
    parser.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="the load generator: a bare asyncio client (default) or httpx (before 2026-12-04)",
    )
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from --out")
    parser.add_argument("--out", type=Path, default=RESULTS / "ai.json")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text()), args.out.with_suffix(".png"))
        return
    sections = set(args.sections.split(","))
    args.server_args = [*SERVER_ARGS, "--device", args.server_device]
    data: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": {
            "rounds": args.rounds,
            "max_tokens": args.max_tokens,
            "requests_per_phase": args.requests or "max(16, 2 x streams)",
            "stagger": args.stagger,
            "client": args.client,
            "concurrency": args.concurrency,
            "server_args": args.server_args,
        },
        "load_average": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        ckpt = checkpoint(Path(scratch))
        data["checkpoint"] = ckpt.name if "checkpoints" in str(ckpt) else "random-init glm4moe-tiny"
        from bench.ai_pool import recovery, scaling  # imports this module: loaded on demand

        for name, run in (
            ("overhead", lambda: overhead(ckpt, Path(scratch), args)),
            ("scaling", lambda: scaling(ckpt, args)),
            ("recovery", lambda: recovery(ckpt, args)),
        ):
            if name not in sections:
                continue
            print(f"{name}:", flush=True)
            before = load_average()
            data[name] = run()
            data["load_average"][name] = {"before": before, "after": load_average()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    plot(data, args.out.with_suffix(".png"))
    print(json.dumps({k: data.get(k) for k in ("load_average",)}, indent=2))
    for row in data.get("overhead", {}).get("compare", []):
        print(row)


if __name__ == "__main__":
    main()
