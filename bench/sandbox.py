"""Cost of the worker sandbox: spawn-to-first-message per profile, and idle memory per worker.

Run from the repository root (as root to measure every profile; the unprivileged variant is
simulated by dropping to an unused uid in a forked, warmed parent):

    PYTHONPATH=. python bench/sandbox.py [--n 40] [--idle 20] [--out bench/results/sandbox.json]

Spawn: a warmed parent (asyncio, msgpack and the sandbox imported, pyseccomp preloaded, the way
the zygote will be) forks a child that calls ``enter`` and sends one byte on its socketpair; the
time is fork to that byte, in the parent. Idle memory: K workers per profile kept alive, blocked
on their socket; RSS and PSS (from smaps_rollup) of each worker and of its monitor.
"""

from __future__ import annotations

import argparse
import asyncio  # noqa: F401 - warm the parent like the zygote
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgpack  # noqa: F401 - warm the parent like the zygote

from ember.runtime.sandbox import (
    Layer,
    LayerReport,
    SandboxSpec,
    enter,
    preload,
    probe,
    read_startup,
)

BASE = frozenset({Layer.HYGIENE, Layer.RLIMITS})
NAMESPACES = frozenset({Layer.MOUNT_NS, Layer.PID_NS, Layer.NET_NS, Layer.IPC_UTS_NS})
WALLS = frozenset({Layer.LANDLOCK, Layer.SECCOMP})
POOL_UID = 231_000


def variants(root: bool) -> dict[str, frozenset[Layer] | None]:
    """Name -> layers (None: plain fork, no sandbox). Root-only layers only when root."""
    uid = frozenset({Layer.UID}) if root else frozenset()
    table: dict[str, frozenset[Layer] | None] = {
        "fork only": None,
        "dev (hygiene + rlimits)": BASE,
        "+ landlock + seccomp": BASE | uid | WALLS,
        "namespaces + private root": BASE | uid | NAMESPACES,
        "full": BASE | uid | NAMESPACES | WALLS,
    }
    if root:
        table["full + cgroup"] = BASE | uid | NAMESPACES | WALLS | {Layer.CGROUP}
    return table


def make_spec(layers: frozenset[Layer], code_dir: Path, uid: int | None) -> SandboxSpec:
    return SandboxSpec(
        deployment_id="bench",
        code_dir=code_dir,
        layers=layers,
        uid=uid if Layer.UID in layers else None,
        memory_limit=1 << 30,
    )


def spawn(spec: SandboxSpec | None) -> tuple[float, socket.socket, int, int]:
    """Fork one worker; returns (ms to its first byte, our socket end, child pid, worker pid)."""
    ours, theirs = socket.socketpair()
    report_r, report_w = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            os.close(report_r)
            if spec is not None:
                enter(spec, theirs.fileno(), report_fd=report_w)
            else:  # a zygote closes inherited fds too: siblings must not hold our socket
                os.closerange(3, theirs.fileno())
                os.closerange(theirs.fileno() + 1, 1 << 16)
            theirs.sendall(b"r")
            theirs.recv(1)  # idle until the parent closes its end
        finally:
            os._exit(0)
    theirs.close()
    os.close(report_w)
    ours.recv(1)
    elapsed = (time.perf_counter() - start) * 1000
    worker = read_startup(report_r).worker_pid if spec is not None else pid
    os.close(report_r)
    return elapsed, ours, pid, worker


def _stop(sock: socket.socket, pid: int) -> float:
    """End a worker; returns the CPU ms it and its monitor used in all (their whole life,
    setup and exit included: wait4 sums a process and the children it reaped)."""
    sock.close()
    _, _, usage = os.wait4(pid, 0)
    return (usage.ru_utime + usage.ru_stime) * 1000


def time_spawns(spec: SandboxSpec | None, n: int) -> tuple[list[float], list[float]]:
    """Wall ms from fork to the first byte, and CPU ms, per spawn."""
    times, cpu = [], []
    for _ in range(n):
        elapsed, sock, pid, _ = spawn(spec)
        cpu.append(_stop(sock, pid))
        times.append(elapsed)
    return times, cpu


def _kib(pid: int, path: str, field: str) -> int | None:
    """A kB field of /proc/<pid>/<path>; None where we may not read it (smaps_rollup of a
    non-dumpable process needs root)."""
    try:
        with open(f"/proc/{pid}/{path}") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except PermissionError:
        return None
    return None


def _median_mib(values: list[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) / 1024 if known else None


def idle_memory(spec: SandboxSpec | None, k: int) -> dict[str, float | int | None]:
    alive = [spawn(spec) for _ in range(k)]
    time.sleep(0.2)
    workers = [w for _, _, _, w in alive]
    monitors = [pid for _, _, pid, w in alive if pid != w]
    result = {
        "workers": k,
        "worker_rss_mib": _median_mib([_kib(w, "status", "VmRSS") for w in workers]),
        "worker_pss_mib": _median_mib([_kib(w, "smaps_rollup", "Pss") for w in workers]),
        "monitor_rss_mib": _median_mib([_kib(m, "status", "VmRSS") for m in monitors]),
        "monitor_pss_mib": _median_mib([_kib(m, "smaps_rollup", "Pss") for m in monitors]),
    }
    for _, sock, pid, _ in alive:
        _stop(sock, pid)
    return result


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "n": len(times),
        "median_ms": statistics.median(times),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "min_ms": ordered[0],
        "first10_median_ms": statistics.median(times[:10]),
        "samples_ms": [round(t, 3) for t in times],
    }


def measure(report: LayerReport, code_dir: Path, n: int, k: int, root: bool) -> dict:
    """Spawn times, round-robin over the variants (load drifts on a shared machine: every
    variant sees the same drift), then idle memory for three of them."""
    specs: dict[str, SandboxSpec | None] = {}
    for name, layers in variants(root).items():
        if layers is None or layers <= report.available() | {Layer.UID}:
            specs[name] = None if layers is None else make_spec(layers, code_dir, POOL_UID)
    times: dict[str, list[float]] = {name: [] for name in specs}
    cpu: dict[str, list[float]] = {name: [] for name in specs}
    for spec in specs.values():
        time_spawns(spec, 3)  # warm-up
    for _ in range(n):
        for name, spec in specs.items():
            wall, used = time_spawns(spec, 1)
            times[name] += wall
            cpu[name] += used
    results = {}
    for name, spec in specs.items():
        entry: dict = summary(times[name])
        entry["cpu_median_ms"] = statistics.median(cpu[name])
        entry["layers"] = sorted(spec.layers) if spec is not None else []
        if name in ("fork only", "dev (hygiene + rlimits)", "full"):
            entry["idle"] = idle_memory(spec, k)
        results[name] = entry
        print(
            f"{name:<28} wall median {entry['median_ms']:6.2f} ms  p90 {entry['p90_ms']:6.2f}"
            f"  cpu median {entry['cpu_median_ms']:6.2f} ms",
            flush=True,
        )
    return results


def unprivileged(code_dir: Path, n: int, k: int) -> dict:
    """The same measurement from a warmed parent that dropped to an unused uid."""
    from tests.sandbox import unpriv

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            unpriv.become(POOL_UID + 500, [code_dir])
            result = measure(probe(), code_dir, n, k, root=False)
            os.write(write_end, json.dumps(result).encode())
        except BaseException:  # noqa: BLE001 - report it, never return into the parent's code
            import traceback

            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data) if data else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="spawns per variant")
    parser.add_argument("--idle", type=int, default=20, help="idle workers for memory")
    parser.add_argument("--out", default="bench/results/sandbox.json")
    parser.add_argument(
        "--plot",
        default="bench/results/sandbox.png",
        help="bar chart (needs the 'bench' extra: matplotlib); '' to skip",
    )
    args = parser.parse_args()
    load_at_start = os.getloadavg()
    preload()
    report = probe()
    root = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix="ember-bench-", dir="/tmp") as tmp:
        code_dir = Path(tmp) / "app"
        code_dir.mkdir()
        (code_dir / "worker.py").write_text("async def fetch(request, env):\n    return 'hi'\n")
        os.chmod(tmp, 0o755)
        print(f"-- {'root' if root else 'unprivileged'}", flush=True)
        results = {
            "root" if root else "unprivileged": measure(report, code_dir, args.n, args.idle, root)
        }
        if root:
            print("-- unprivileged (user namespace)", flush=True)
            results["unprivileged"] = unprivileged(code_dir, args.n, args.idle)
    out = {
        "machine": {
            "kernel": platform.release(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_at_start": load_at_start,
            "loadavg_at_end": os.getloadavg(),
            "note": "2 vCPUs shared with other jobs: compare variants within one run",
        },
        "layers_available": sorted(report.available()),
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    if args.plot:
        plot(out, Path(args.plot))
        print(f"wrote {args.plot}", file=sys.stderr)


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(out["results"])
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4), sharey=True)
    for axis, mode in zip(list(getattr(axes, "flat", [axes])), modes, strict=True):
        rows = out["results"][mode]
        names = list(rows)
        xs = range(len(names))
        axis.bar(
            [x - 0.2 for x in xs],
            [rows[n]["median_ms"] for n in names],
            0.4,
            label="wall, fork to first message (median)",
        )
        axis.bar(
            [x + 0.2 for x in xs],
            [rows[n]["cpu_median_ms"] for n in names],
            0.4,
            label="CPU of worker + monitor (median)",
        )
        axis.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
        axis.set_title(
            f"{mode} (load {out['machine']['loadavg_at_start'][0]:.1f} on "
            f"{out['machine']['cpus']} vCPUs)"
        )
        axis.set_ylabel("ms")
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
