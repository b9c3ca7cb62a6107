"""Runtime benchmark: ``ember dev`` (hello world) against a bare starlette+uvicorn app.

    PYTHONPATH=. python -m bench.runtime [--duration 2] [--rounds 10] [--cold 40] [--reference]

Both servers run as subprocesses on 127.0.0.1 with the same uvicorn, HTTP parser and event loop
(uvicorn's defaults: httptools and uvloop where installed; ember dev and its isolates pick the
loop the same way); one load generator (this process: asyncio, keep-alive connections, raw
HTTP/1.1) drives both, in alternating rounds (bare first, then ember first: ABBA, so a drift in
the machine's load does not favour either), so the comparison is a ratio within one run:

- latency: one connection, requests back to back: p50 / p99 per request;
- throughput: ``--connections`` concurrent keep-alive connections: requests/s;
- cold start: an isolate forked from the warm zygote, from spawn to the first response
  (``Supervisor.fetch`` on a deployment with no isolate yet), median of ``--cold`` runs; and a
  fresh ``python -I -c pass`` for scale.

``--reference`` adds ``ember dev --no-fast-http`` (uvicorn's ASGI path, as before the HTTP fast
path) to the same rounds; ``--baseline DIR`` adds ``ember dev`` run from another checkout's code
(``git archive main | tar -x -C DIR``), so a branch is compared with main within one run. CPU
per request is recorded for each server's processes, its main process (ember's supervisor) and
the load generator: on a quiet machine the throughput ratio follows the supervisor's CPU per
request against the bare server's.

Writes ``bench/results/runtime.json`` and, if matplotlib is installed, ``runtime.png``.
The machine is shared: the JSON records the load average before and after, and at each round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.runtime_servers import (
    COUNTERS,
    counters,
    cpu_seconds,
    free_port,
    latency,
    process_tree,
    start_bare,
    start_ember,
    throughput,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def cold_starts(runs: int, workdir: Path) -> list[float]:
    """Seconds from spawn to first response for fresh isolates of the hello example."""
    import dataclasses

    from ember.runtime.deployment import load_deployment
    from ember.runtime.http import HttpRequest
    from ember.runtime.supervisor import Supervisor

    supervisor = Supervisor(state_dir=workdir / "cold-state")
    await supervisor.start()
    base = load_deployment(ROOT / "examples" / "hello")
    samples: list[float] = []
    try:
        for i in range(runs + 2):
            deployment = dataclasses.replace(base, id=f"cold-{i}")
            await supervisor.deploy(deployment, eager=False)
            start = time.perf_counter()
            response = await supervisor.fetch(
                deployment.id, HttpRequest("GET", "http://bench/", [])
            )
            elapsed = time.perf_counter() - start
            assert response.body == b"Hello, world!", response.body
            await supervisor.remove(deployment.id)
            if i >= 2:  # the first two warm up the zygote's page cache
                samples.append(elapsed)
    finally:
        await supervisor.close()
    return samples


def server_stack() -> dict[str, str]:
    """What uvicorn runs on here (both servers use the same: its defaults pick these)."""
    import importlib.util

    import uvicorn

    from ember.runtime.loop import loop_factory

    return {
        "uvicorn": uvicorn.__version__,
        "http": "httptools" if importlib.util.find_spec("httptools") else "h11",
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "ember_loop": loop_factory().__module__.split(".")[0],  # ember dev and its isolates
    }


def fresh_python(runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds per server")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--cold", type=int, default=40, help="cold starts to time")
    parser.add_argument("--output", type=Path, default=RESULTS / "runtime.json")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also run ember dev --no-fast-http (uvicorn's ASGI path) in the same rounds",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also run ember dev from this directory's code (e.g. main's) in the same rounds",
    )
    args = parser.parse_args()
    names = ["bare", "ember", *(["ember_asgi"] if args.reference else [])]
    if args.baseline is not None:
        if not (args.baseline / "ember" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: no ember package there")
        names.append("ember_baseline")

    load_before = os.getloadavg()
    results: dict[str, dict[str, list[float]]] = {
        name: {
            "rps": [],
            "p50_ms": [],
            "p99_ms": [],
            "server_cpu_us_per_request": [],
            "main_process_cpu_us_per_request": [],
            "client_cpu_us_per_request": [],
            "load_1m": [],
            # per request, of the main process (ember's supervisor) and of the last process of
            # the tree (ember's isolate; the bare server again): see runtime_servers.counters
            **{f"main_{c}_per_request": [] for c in COUNTERS},
            **{f"last_{c}_per_request": [] for c in COUNTERS},
        }
        for name in names
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ports = {name: free_port() for name in names}
        servers = {
            "bare": start_bare(ports["bare"], workdir),
            "ember": start_ember(ports["ember"], workdir / "state"),
        }
        if args.reference:
            servers["ember_asgi"] = start_ember(
                ports["ember_asgi"], workdir / "state_asgi", "--no-fast-http"
            )
        if args.baseline is not None:
            servers["ember_baseline"] = start_ember(
                ports["ember_baseline"], workdir / "state_baseline", root=args.baseline.resolve()
            )
        try:
            for port in ports.values():
                await wait_ready(port)
                await throughput(port, 1.0, args.connections)  # warm up
            for round_index in range(args.rounds):
                order = list(ports.items())
                for name, port in order if round_index % 2 == 0 else order[::-1]:
                    results[name]["load_1m"].append(os.getloadavg()[0])
                    samples = await latency(port, args.duration)
                    pids = process_tree(servers[name].pid)
                    main_before = cpu_seconds(pids[:1])
                    hop_before = counters(pids[0]), counters(pids[-1])
                    cpu_before, started = cpu_seconds(pids), time.perf_counter()
                    client_before = time.process_time()  # the load generator (this process)
                    rps = await throughput(port, args.duration, args.connections)
                    client_used = time.process_time() - client_before
                    cpu_used = cpu_seconds(pids) - cpu_before
                    main_used = cpu_seconds(pids[:1]) - main_before
                    hop_after = counters(pids[0]), counters(pids[-1])
                    requests = rps * (time.perf_counter() - started)
                    results[name]["server_cpu_us_per_request"].append(cpu_used / requests * 1e6)
                    results[name]["main_process_cpu_us_per_request"].append(
                        main_used / requests * 1e6
                    )
                    results[name]["client_cpu_us_per_request"].append(client_used / requests * 1e6)
                    hop = zip(("main", "last"), hop_before, hop_after, strict=True)
                    for which, before, after in hop:
                        for counter, b, a in zip(COUNTERS, before, after, strict=True):
                            key = f"{which}_{counter}_per_request"
                            results[name][key].append((a - b) / requests)
                    results[name]["rps"].append(rps)
                    results[name]["p50_ms"].append(percentile(samples, 0.5) * 1000)
                    results[name]["p99_ms"].append(percentile(samples, 0.99) * 1000)
                    row = results[name]
                    print(
                        f"round {round_index + 1} {name:10s}: {rps:7.0f} req/s, "
                        f"p50 {row['p50_ms'][-1]:.3f} ms, p99 {row['p99_ms'][-1]:.3f} ms, "
                        f"server CPU {row['server_cpu_us_per_request'][-1]:.0f} us/request"
                    )
        finally:
            for server in servers.values():
                server.terminate()
                server.wait(10)
        cold = await cold_starts(args.cold, workdir)
    python_start = fresh_python(10)

    bare, ember = results["bare"], results["ember"]
    summary = {
        "bare_rps": statistics.median(bare["rps"]),
        "ember_rps": statistics.median(ember["rps"]),
        "rps_ratio": statistics.median(
            e / b for e, b in zip(ember["rps"], bare["rps"], strict=True)
        ),
        "bare_p50_ms": statistics.median(bare["p50_ms"]),
        "ember_p50_ms": statistics.median(ember["p50_ms"]),
        "added_p50_ms": statistics.median(
            e - b for e, b in zip(ember["p50_ms"], bare["p50_ms"], strict=True)
        ),
        "bare_p99_ms": statistics.median(bare["p99_ms"]),
        "bare_cpu_us_per_request": statistics.median(bare["server_cpu_us_per_request"]),
        "ember_cpu_us_per_request": statistics.median(ember["server_cpu_us_per_request"]),
        "ember_supervisor_cpu_us_per_request": statistics.median(
            ember["main_process_cpu_us_per_request"]
        ),
        "ember_p99_ms": statistics.median(ember["p99_ms"]),
        "cold_start_median_ms": statistics.median(cold) * 1000,
        "cold_start_p90_ms": percentile(cold, 0.9) * 1000,
        "fresh_python_median_ms": statistics.median(python_start) * 1000,
        "bare_main_process_cpu_us_per_request": statistics.median(
            bare["main_process_cpu_us_per_request"]
        ),
    }
    if args.reference:  # the fast path's own effect, measured in the same rounds
        asgi = results["ember_asgi"]
        summary |= {
            "ember_asgi_rps": statistics.median(asgi["rps"]),
            "ember_asgi_rps_ratio": statistics.median(
                e / b for e, b in zip(asgi["rps"], bare["rps"], strict=True)
            ),
            "fast_over_asgi_rps": statistics.median(
                f / a for f, a in zip(ember["rps"], asgi["rps"], strict=True)
            ),
            "ember_asgi_supervisor_cpu_us_per_request": statistics.median(
                asgi["main_process_cpu_us_per_request"]
            ),
        }
    if args.baseline is not None:  # this checkout against the baseline's code, same rounds
        base = results["ember_baseline"]
        summary |= {
            "ember_baseline_rps": statistics.median(base["rps"]),
            "ember_baseline_rps_ratio": statistics.median(
                e / b for e, b in zip(base["rps"], bare["rps"], strict=True)
            ),
            "ember_over_baseline_rps": statistics.median(
                e / b for e, b in zip(ember["rps"], base["rps"], strict=True)
            ),
            "ember_baseline_supervisor_cpu_us_per_request": statistics.median(
                base["main_process_cpu_us_per_request"]
            ),
            "ember_baseline_cpu_us_per_request": statistics.median(
                base["server_cpu_us_per_request"]
            ),
        }
    summary["hop_per_request"] = {  # medians: main (supervisor) and last (isolate) process
        name: {key: round(statistics.median(results[name][key]), 3) for key in results[name]}
        for name in names
        if name != "bare"
    }
    for row in summary["hop_per_request"].values():
        for key in ("rps", "p50_ms", "p99_ms", "load_1m"):
            row.pop(key)
    summary["client_cpu_us_per_request"] = statistics.median(
        c for name in names for c in results[name]["client_cpu_us_per_request"]
    )
    summary["supervisor_over_bare_cpu"] = statistics.median(
        e / b
        for e, b in zip(
            ember["main_process_cpu_us_per_request"],
            bare["main_process_cpu_us_per_request"],
            strict=True,
        )
    )
    report = {
        "benchmark": "runtime",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        "server": server_stack(),
        "settings": vars(args)
        | {
            "output": str(args.output.relative_to(ROOT))
            if args.output.is_relative_to(ROOT)
            else str(args.output),
            # (its name only: the JSON is committed, a machine's paths are not)
            "baseline": args.baseline.resolve().name if args.baseline is not None else None,
        },
        "summary": summary,
        "rounds": results,
        "cold_start_ms": [s * 1000 for s in cold],
        "goals": {"rps_ratio": ">= 0.5", "added_p50_ms": "< 0.5", "cold_start_median_ms": "< 20"},
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    plot(report, args.output.with_suffix(".png"))


def plot(report: dict, path: Path) -> None:  # type: ignore[type-arg]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (pip install -e '.[bench]')")
        return
    s = report["summary"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    names = ["bare starlette", "ember dev"]
    values, colors = [s["bare_rps"], s["ember_rps"]], ["#888", "#d9480f"]
    if "ember_asgi_rps" in s:  # --reference: ember dev --no-fast-http in the same rounds
        names.append("ember dev\n--no-fast-http")
        values.append(s["ember_asgi_rps"])
        colors.append("#f4a582")
    if "ember_baseline_rps" in s:  # --baseline: ember dev from another checkout's code
        names.append("ember dev\n(baseline)")
        values.append(s["ember_baseline_rps"])
        colors.append("#fdd0a2")
    axes[0].bar(names, values, color=colors)
    axes[0].set_title(
        f"requests/s, {report['settings']['connections']} connections\n"
        f"(median per round of ember / bare: {s['rps_ratio']:.2f})",
        fontsize=10,
    )
    axes[0].axhline(s["bare_rps"] / 2, ls="--", c="k", lw=0.8, label="goal: half of bare")
    axes[0].legend(fontsize=8)
    width = 0.35
    x = range(2)
    axes[1].bar(
        [i - width / 2 for i in x],
        [s["bare_p50_ms"], s["bare_p99_ms"]],
        width,
        label="bare",
        color="#888",
    )
    axes[1].bar(
        [i + width / 2 for i in x],
        [s["ember_p50_ms"], s["ember_p99_ms"]],
        width,
        label="ember dev",
        color="#d9480f",
    )
    axes[1].set_xticks(list(x), ["p50", "p99"])
    axes[1].set_title("latency, 1 connection (ms)")
    axes[1].legend(fontsize=8)
    axes[2].hist(report["cold_start_ms"], bins=20, color="#d9480f")
    axes[2].axvline(20, ls="--", c="k", lw=0.8, label="goal: 20 ms")
    axes[2].axvline(
        s["fresh_python_median_ms"], ls=":", c="#555", lw=1, label="fresh python -c pass"
    )
    axes[2].set_title("isolate cold start, spawn to first response (ms)")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
