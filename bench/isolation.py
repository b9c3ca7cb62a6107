"""What the sandbox costs through the Supervisor: dev profile against full.

Run from the repository root (as root, so the full profile gets every layer, pool uids included):

    PYTHONPATH=. python -m bench.isolation [--n 30] [--seconds 1.5] [--rounds 5] [--idle 20]

1. Cold start: a deployment with no isolate yet (deployed with ``eager=False``), from the
   supervisor's ``fetch`` to its response: zygote fork, the sandbox (for full), the relayed
   startup report, the module import, one request. N per profile, interleaved round-robin.
2. Per-request overhead: one warm deployment per profile, ``supervisor.fetch`` in a loop, with
   1 and 16 requests in flight, in alternating rounds; requests/s per profile and their ratio.
3. Memory per idle deployment: K deployments per profile, each with its isolate idle; PSS and
   RSS of the worker and, for full, of its monitor (smaps_rollup; root reads non-dumpable ones).
4. An honest tenant under attack (full profile): its request latency alone, then while another
   deployment sends back-to-back requests that spin until the CPU limit (100 ms) stops them.

The machine's load average is recorded before and after: on a shared machine, compare the
profiles within one run. Writes ``bench/results/isolation.json`` (and ``.png`` if matplotlib).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ember.runtime.deployment import load_deployment
from ember.runtime.http import HttpRequest
from ember.runtime.isolation import SandboxPolicy
from ember.runtime.sandbox import DEV, FULL, Profile
from ember.runtime.supervisor import Supervisor

WORKER = """
from workers import Response

async def fetch(request, env):
    return Response("hello")
"""
SPIN = """
from workers import Response

async def fetch(request, env):
    while True:
        pass
"""
PROFILES: dict[str, Profile] = {"dev": DEV, "full": FULL}
REQUEST = HttpRequest("GET", "http://bench.local/", [], b"")


def _project(base: Path, name: str = "hello", source: str = WORKER) -> Path:
    root = base / name
    root.mkdir(parents=True)
    (root / "worker.py").write_text(source)
    (root / "ember.yaml").write_text(f"name: {name}\nmain: worker.py\n")
    return root


async def _body(supervisor: Supervisor, deployment_id: str) -> int:
    response = await supervisor.fetch(deployment_id, REQUEST)
    if isinstance(response.body, bytes):
        assert response.status == 200, response.body
        return response.status
    async for _ in response.body:  # type: ignore[union-attr]
        pass
    return response.status


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[int(len(ordered) * 0.9)],
        "min": ordered[0],
        "n": len(ordered),
    }


async def cold_starts(supervisor: Supervisor, root: Path, n: int) -> dict[str, Any]:
    base = load_deployment(root)
    times: dict[str, list[float]] = {name: [] for name in PROFILES}
    for index in range(n):
        for name, profile in PROFILES.items():
            deployment = dataclasses.replace(base, id=f"cold-{name}-{index}")
            await supervisor.deploy(deployment, eager=False, sandbox=profile)
            started = time.perf_counter()
            await _body(supervisor, deployment.id)
            times[name].append((time.perf_counter() - started) * 1000)
            await supervisor.remove(deployment.id)
    return {name: _stats(values) for name, values in times.items()}


async def _rate(supervisor: Supervisor, deployment_id: str, seconds: float, width: int) -> float:
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await _body(supervisor, deployment_id)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(width)))
    return done / (time.perf_counter() - started)


async def throughput(
    supervisor: Supervisor, root: Path, seconds: float, rounds: int
) -> dict[str, Any]:
    base = load_deployment(root)
    for name, profile in PROFILES.items():
        await supervisor.deploy(dataclasses.replace(base, id=f"warm-{name}"), sandbox=profile)
        for _ in range(200):
            await _body(supervisor, f"warm-{name}")
    result: dict[str, Any] = {}
    for width in (1, 16):
        rates: dict[str, list[float]] = {name: [] for name in PROFILES}
        for _ in range(rounds):
            for name in PROFILES:
                rates[name].append(await _rate(supervisor, f"warm-{name}", seconds, width))
        medians = {name: statistics.median(values) for name, values in rates.items()}
        result[f"in_flight_{width}"] = {
            "requests_per_s": medians,
            "rounds": rates,
            "full_over_dev": medians["full"] / medians["dev"],
        }
    for name in PROFILES:
        await supervisor.remove(f"warm-{name}")
    return result


def _kib(pid: int, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _median_mib(values: list[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known) / 1024, 2) if known else None


async def idle_memory(supervisor: Supervisor, root: Path, k: int) -> dict[str, Any]:
    base = load_deployment(root)
    result: dict[str, Any] = {}
    for name, profile in PROFILES.items():
        ids = [f"idle-{name}-{i}" for i in range(k)]
        for deployment_id in ids:
            await supervisor.deploy(dataclasses.replace(base, id=deployment_id), sandbox=profile)
            await _body(supervisor, deployment_id)
        await asyncio.sleep(0.5)
        workers, monitors = [], []
        for deployment_id in ids:
            process = supervisor.isolate(deployment_id)
            assert process is not None
            workers.append(process.pid)
            if process.spawn_pid != process.pid:
                monitors.append(process.spawn_pid)
        entry = {
            "worker_pss_mib": _median_mib([_kib(p, "Pss") for p in workers]),
            "worker_rss_mib": _median_mib([_kib(p, "Rss") for p in workers]),
            "monitor_pss_mib": _median_mib([_kib(p, "Pss") for p in monitors]),
            "monitor_rss_mib": _median_mib([_kib(p, "Rss") for p in monitors]),
            "deployments": k,
        }
        pss = [entry["worker_pss_mib"], entry["monitor_pss_mib"]]
        entry["deployment_pss_mib"] = round(sum(v for v in pss if v is not None), 2)
        result[name] = entry
        for deployment_id in ids:
            await supervisor.remove(deployment_id)
    return result


async def _latencies(supervisor: Supervisor, deployment_id: str, seconds: float) -> list[float]:
    found = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        await _body(supervisor, deployment_id)
        found.append((time.perf_counter() - started) * 1000)
    return found


async def under_attack(supervisor: Supervisor, base: Path, seconds: float) -> dict[str, Any]:
    honest = load_deployment(_project(base, "honest"))
    spin = load_deployment(_project(base, "spin", SPIN))
    limits = dataclasses.replace(spin.limits, cpu_ms=100)
    await supervisor.deploy(honest, sandbox=FULL)
    await supervisor.deploy(dataclasses.replace(spin, limits=limits), sandbox=FULL)
    await _latencies(supervisor, honest.id, 0.3)  # warm
    alone = await _latencies(supervisor, honest.id, seconds)
    stop = asyncio.Event()
    statuses: list[int] = []

    async def attack() -> None:
        while not stop.is_set():
            statuses.append((await supervisor.fetch(spin.id, REQUEST)).status)

    attackers = [asyncio.ensure_future(attack()) for _ in range(2)]
    attacked = await _latencies(supervisor, honest.id, seconds)
    stop.set()
    await asyncio.gather(*attackers)
    for deployment in (honest, spin):
        await supervisor.remove(deployment.id)
    result = {"alone_ms": _stats(alone), "under_attack_ms": _stats(attacked)}
    for part in result.values():
        part["p99"] = sorted(alone if part is result["alone_ms"] else attacked)[
            int(part["n"] * 0.99)
        ]
    result["attack_requests"] = len(statuses)
    result["attack_statuses"] = sorted(set(statuses))
    result["p99_ratio"] = result["under_attack_ms"]["p99"] / result["alone_ms"]["p99"]
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ember-bench-isolation-") as tmp:
        base = Path(tmp)
        base.chmod(0o711)
        root = _project(base)
        supervisor = Supervisor(
            state_dir=base / "state", sandbox=SandboxPolicy(default_profile=FULL)
        )
        await supervisor.start()
        try:
            status = supervisor.sandbox_status()
            report = status.report
            layers = sorted(x.value for x in report.available()) if report else []
            load_before = os.getloadavg()
            cold = await cold_starts(supervisor, root, args.n)
            rates = await throughput(supervisor, root, args.seconds, args.rounds)
            memory = await idle_memory(supervisor, root, args.idle)
            attack = await under_attack(supervisor, base, args.seconds * 2)
            load_after = os.getloadavg()
        finally:
            await supervisor.close()
    return {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": os.uname().release,
            "python": sys.version.split()[0],
            "euid": os.geteuid(),
            "load_before": load_before,
            "load_after": load_after,
        },
        "full_layers": layers,
        "cold_start_ms": cold,
        "throughput": rates,
        "idle_memory": memory,
        "honest_tenant": attack,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    names = list(PROFILES)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    cold = result["cold_start_ms"]
    axes[0].bar(names, [cold[n]["median"] for n in names], color=["#999", "#c60"])
    axes[0].set_title("cold start, median (ms)")
    for index, width in enumerate((1, 16)):
        entry = result["throughput"][f"in_flight_{width}"]
        medians = [entry["requests_per_s"][n] for n in names]
        spread = [
            [m - min(entry["rounds"][n]) for m, n in zip(medians, names, strict=True)],
            [max(entry["rounds"][n]) - m for m, n in zip(medians, names, strict=True)],
        ]
        axes[1].bar(
            [f"{n}\n{width} in flight" for n in names],
            medians,
            yerr=spread,
            capsize=4,
            color=["#999", "#c60"],
            alpha=1.0 if index else 0.6,
        )
    axes[1].set_title("requests/s (median, min-max of rounds)")
    memory = result["idle_memory"]
    axes[2].bar(names, [memory[n]["deployment_pss_mib"] for n in names], color=["#999", "#c60"])
    axes[2].set_title("PSS per idle deployment (MiB)")
    load = result["machine"]["load_before"][0]
    fig.suptitle(f"dev vs full sandbox profile ({result['machine']['cpus']} CPUs, load {load:.1f})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=30, help="cold starts per profile")
    parser.add_argument("--seconds", type=float, default=1.5, help="seconds per rate round")
    parser.add_argument("--rounds", type=int, default=5, help="rate rounds per profile")
    parser.add_argument("--idle", type=int, default=20, help="idle deployments per profile")
    parser.add_argument("--out", type=Path, default=Path("bench/results/isolation.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
