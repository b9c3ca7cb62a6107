"""``ember serve`` with many deployments: memory per idle deployment, requests/s with 100 live.

    PYTHONPATH=. python bench/serve.py [--deployments 100] [--seconds 10] [--concurrency 32]

1. Starts the real ``ember serve`` (sandboxed workers: the FULL profile on this machine) and
   deploys N workers over the client/v4 API, timing each deploy call.
2. Memory: the proportional set size (PSS, shared pages split among the processes that share
   them; RSS too) of the whole process tree (supervisor, zygote, sandbox monitors, workers),
   before any deployment, with every deployment's isolate started and idle, and after the
   platform stopped the idle isolates (``--idle-timeout``): per deployment = (tree - empty) / N.
3. Throughput: a keep-alive HTTP/1.1 client (asyncio, one coroutine per connection) sends GETs
   to random deployments by Host name for ``--seconds``, then the same against a single
   deployment; requests/s of each and their ratio. Client and platform share this machine's
   cores, so the absolute numbers are a floor; the load average is recorded.
Results: bench/results/serve.json.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a file, bench/ would come first on sys.path: put the repo root there instead.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import httpx  # noqa: E402

from ember.runtime.deployments.plane import ControlPlane  # noqa: E402
from tests.serve.conftest import upload  # noqa: E402

WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("hello from {name}")
"""


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants (host pids, whatever namespaces they are in)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def tree_memory(root: int) -> dict[str, float]:
    """PSS and RSS (MiB) summed over the process tree, and how many processes it has."""
    pss = rss = 0
    pids = tree_pids(root)
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            continue
    return {"pss_mib": pss / 1024, "rss_mib": rss / 1024, "processes": len(pids)}


async def load(port: int, hosts: list[str], seconds: float, concurrency: int) -> dict[str, float]:
    """Keep-alive GETs to random ``hosts`` for ``seconds``: requests/s and latency."""
    done = 0
    errors = 0
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def connection() -> None:
        nonlocal done, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.monotonic() < deadline:
                host = random.choice(hosts)
                started = time.perf_counter()
                writer.write(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - started)
                if head.startswith(b"HTTP/1.1 200"):
                    done += 1
                else:
                    errors += 1
        finally:
            writer.close()

    started = time.monotonic()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "requests_per_s": done / elapsed,
        "errors": errors,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "seconds": elapsed,
    }


def plot(results: dict[str, object], path: Path) -> None:
    """Memory per deployment and requests/s side by side; needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    memory = results["memory"]
    throughput = results["throughput"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.bar(
        ["isolate started,\nidle", "isolate stopped\n(idle eviction)"],
        [memory["per_started_deployment_pss_mib"], memory["per_evicted_deployment_pss_mib"]],
        color=["tab:orange", "tab:green"],
    )
    left.set_ylabel("MiB PSS per deployment")
    left.set_title("memory per idle deployment")
    right.bar(
        [f"random of {throughput['deployments']}", "one deployment"],
        [
            throughput["random_deployment"]["requests_per_s"],
            throughput["one_deployment"]["requests_per_s"],
        ],
        color=["tab:blue", "tab:gray"],
    )
    right.set_ylabel("requests/s")
    right.set_title(f"{throughput['concurrency']} keep-alive connections")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deployments", type=int, default=100)
    parser.add_argument("--memory-sample", type=int, default=20, help="deployments started")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "serve.json")
    parser.add_argument("--plot-only", action="store_true", help="redraw from an --out file")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text()), args.out.with_suffix(".png"))
        return
    results: dict[str, object] = {
        "machine": {"cpu_count": os.cpu_count(), "loadavg_before": os.getloadavg()},
    }
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(scratch) / "state"
        port_file = Path(scratch) / "port"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        # Every deployment's isolate live at once, all of one account: neither the cap nor the
        # account's share of it (platform.accounts.isolate_share) may stop any of them.
        config = Path(scratch) / "ember.yaml"
        config.write_text(
            f"platform:\n  max_isolates: {args.deployments}\n  accounts: {{isolate_share: null}}\n"
        )
        serve = subprocess.Popen(
            [sys.executable, "-m", "ember", "serve", "--port", "0", "--state-dir", str(state),
             "--port-file", str(port_file), "--idle-timeout", "20s", "--config", str(config)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while not port_file.exists():
                assert serve.poll() is None, "ember serve did not start"
                time.sleep(0.05)
            port = int(port_file.read_text())
            plane = ControlPlane(state)
            account, issued = plane.accounts.create_permanent("bench")
            plane.close()
            api = httpx.Client(
                base_url=f"http://127.0.0.1:{port}/client/v4",
                headers={"authorization": f"Bearer {issued.token}"},
                timeout=120,
            )
            time.sleep(1.0)
            empty = tree_memory(serve.pid)
            deploy_ms = []
            for i in range(args.deployments):
                body, headers = upload(WORKER.format(name=f"w{i}"))
                started = time.perf_counter()
                reply = api.put(
                    f"/accounts/{account.id}/workers/scripts/w{i}", content=body, headers=headers
                )
                deploy_ms.append((time.perf_counter() - started) * 1000)
                assert reply.status_code == 200, reply.text
                if i + 1 == args.memory_sample:
                    time.sleep(1.0)
                    sample = tree_memory(serve.pid)
            hosts = [f"w{i}.bench.localhost" for i in range(args.deployments)]
            for host in hosts:  # every deployment answers (its isolate is up)
                assert (
                    httpx.get(f"http://127.0.0.1:{port}/", headers={"host": host}).status_code
                    == 200
                )
            time.sleep(1.0)
            started_all = tree_memory(serve.pid)
            results["deploy_api_ms"] = {
                "median": statistics.median(deploy_ms),
                "p90": sorted(deploy_ms)[int(len(deploy_ms) * 0.9)],
            }
            results["memory"] = {
                "empty": empty,
                f"{args.memory_sample}_started": sample,
                f"{args.deployments}_started": started_all,
                "per_started_deployment_pss_mib": (started_all["pss_mib"] - empty["pss_mib"])
                / args.deployments,
                "per_started_deployment_rss_mib": (started_all["rss_mib"] - empty["rss_mib"])
                / args.deployments,
            }
            print(json.dumps(results, indent=2))
            spread = asyncio.run(load(port, hosts, args.seconds, args.concurrency))
            single = asyncio.run(load(port, hosts[:1], args.seconds, args.concurrency))
            results["throughput"] = {
                "deployments": args.deployments,
                "concurrency": args.concurrency,
                "random_deployment": spread,
                "one_deployment": single,
                "ratio_random_to_one": spread["requests_per_s"] / single["requests_per_s"],
            }
            results["machine"]["loadavg_after_load"] = os.getloadavg()  # type: ignore[index]
            time.sleep(30)  # past --idle-timeout and a housekeeping pass: isolates stopped
            evicted = tree_memory(serve.pid)
            results["memory"]["after_idle_eviction"] = evicted  # type: ignore[index]
            results["memory"]["per_evicted_deployment_pss_mib"] = (  # type: ignore[index]
                evicted["pss_mib"] - empty["pss_mib"]
            ) / args.deployments
            api.close()
        finally:
            serve.terminate()
            serve.wait(30)
    print(json.dumps(results, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    try:
        plot(results, args.out.with_suffix(".png"))
        print(f"wrote {args.out.with_suffix('.png')}")
    except ImportError:
        print("matplotlib is not installed: no plot")


if __name__ == "__main__":
    main()
