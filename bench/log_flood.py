"""Does one tenant's print flood slow everybody down? A victim worker's latency on ``ember serve``
while another account's worker prints 100-character lines to stderr in a loop, on this
checkout's platform and on ``--baseline``'s (a checkout from before isolate output had a
budget), one platform each, their phases alternating round by round under the same load.

    git archive <commit> | tar -x -C <dir>
    PYTHONPATH=. python -m bench.log_flood --baseline <dir> --baseline-commit <commit>

Each platform serves two permanent accounts: ``victim`` (a worker answering a short text) and
``flood`` (``printer``: each request prints ``--lines`` lines of ``--line-bytes`` to stderr and
answers; ``noop``: answers at once). A phase runs ``--seconds``: ``--victim-connections``
keep-alive connections send the victim's worker requests one after the other, and one more
connection floods: ``quiet`` (none), ``print`` (requests to ``printer``), ``noop`` (requests to
``noop``: the same request flood without output, to tell the output's cost from the requests').
Per phase: the victim's requests/s and p50 / p99 latency, the flood's requests, and the CPU the
platform's own process (the supervisor: router, isolate frames, logs) used, in % of one core.
Writes ``bench/results/log_flood.json``: the phases, and per side and kind the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai_load import checkout_commit, load_average  # noqa: E402
from tests.serve.conftest import upload  # noqa: E402

RESULTS = ROOT / "bench" / "results"
VICTIM = """\
from workers import Response


async def on_fetch(request, env):
    return Response("hello")
"""
PRINTER = """\
import sys
from workers import Response

LINE = "x" * {width}


async def on_fetch(request, env):
    for _ in range({lines}):
        print(LINE, file=sys.stderr)
    return Response("printed")
"""
NOOP = VICTIM.replace("hello", "noop")
KINDS = ("quiet", "print", "noop")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Platform:
    """One checkout's ``ember serve`` with the victim's and the flooder's workers."""

    def __init__(self, name: str, code: Path, scratch: Path, args: argparse.Namespace) -> None:
        self.name = name
        self.env = {**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1"}
        self.code = code
        self.state = scratch / name / "state"
        self.state.parent.mkdir(parents=True)
        port_file = scratch / name / "port"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ember", "serve", "--port", "0", "--state-dir", str(self.state)]
            + ["--port-file", str(port_file), "--idle-timeout", "1h"],
            cwd=code,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not port_file.exists():
            assert self.process.poll() is None and time.monotonic() < deadline, "serve died"
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        printer = PRINTER.format(width=args.line_bytes - 1, lines=args.lines)
        self._deploy("victim", {"hello": VICTIM})
        self._deploy("flood", {"printer": printer, "noop": NOOP})

    def _deploy(self, account: str, workers: dict[str, str]) -> None:
        created = subprocess.run(
            [sys.executable, "-m", "ember", "accounts", "create", account, "--json"]
            + ["--state-dir", str(self.state)],
            cwd=self.code,
            env=self.env,
            capture_output=True,
            check=True,
        )
        made = json.loads(created.stdout)
        api = f"http://127.0.0.1:{self.port}/client/v4/accounts/{made['id']}/workers/scripts"
        auth = {"authorization": f"Bearer {made['token']}"}
        for name, source in workers.items():
            body, headers = upload(source)
            reply = httpx.put(f"{api}/{name}", content=body, headers=headers | auth, timeout=120)
            assert reply.status_code == 200, reply.text

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def _client(
    port: int, host: str, stop: asyncio.Event, latencies: list[float] | None = None
) -> int:
    """Requests to ``host`` one after the other on one keep-alive connection until ``stop``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    try:
        while not stop.is_set():
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            assert head.startswith(b"HTTP/1.1 200"), head
            if latencies is not None:
                latencies.append((time.perf_counter() - started) * 1e3)
            done += 1
    finally:
        writer.close()
    return done


async def phase(platform: Platform, kind: str, args: argparse.Namespace) -> dict:
    stop = asyncio.Event()
    latencies: list[float] = []
    flood = {"print": "printer", "noop": "noop"}.get(kind)
    flooder = (
        asyncio.create_task(_client(platform.port, f"{flood}.flood.localhost", stop))
        if flood
        else None
    )
    if flooder is not None:
        await asyncio.sleep(0.5)  # the flood is under way before the victim is measured
    cpu = cpu_seconds(platform.process.pid)
    started = time.perf_counter()
    victims = [
        asyncio.create_task(_client(platform.port, "hello.victim.localhost", stop, latencies))
        for _ in range(args.victim_connections)
    ]
    await asyncio.sleep(args.seconds)
    stop.set()
    await asyncio.gather(*victims)
    elapsed = time.perf_counter() - started
    supervisor = (cpu_seconds(platform.process.pid) - cpu) / elapsed * 100
    flooded = await flooder if flooder is not None else 0
    latencies.sort()
    return {
        "side": platform.name,
        "kind": kind,
        "victim_requests_per_s": round(len(latencies) / elapsed, 1),
        "victim_p50_ms": round(statistics.median(latencies), 2),
        "victim_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 2),
        "flood_requests": flooded,
        "supervisor_cpu_percent": round(supervisor, 1),
        "loadavg": os.getloadavg()[0],
    }


def summary(phases: list[dict]) -> list[dict]:
    out = []
    for side, kind in itertools.product(("baseline", "this"), KINDS):
        rows = [p for p in phases if p["side"] == side and p["kind"] == kind]
        if not rows:
            continue
        row: dict = {"side": side, "kind": kind, "rounds": len(rows)}
        for key in (
            "victim_requests_per_s",
            "victim_p50_ms",
            "victim_p99_ms",
            "flood_requests",
            "supervisor_cpu_percent",
        ):
            row[key] = round(statistics.median(r[key] for r in rows), 2)
        out.append(row)
    return out


async def run(platforms: list[Platform], args: argparse.Namespace) -> list[dict]:
    for platform in platforms:  # warm: every isolate started, the client's path taken once
        warm = argparse.Namespace(**{**vars(args), "seconds": 1.0})
        for kind in KINDS:
            await phase(platform, kind, warm)
    phases = []
    for round_index in range(args.rounds):
        order = platforms if round_index % 2 == 0 else platforms[::-1]
        for platform in order:
            for kind in KINDS:
                result = await phase(platform, kind, args)
                result["round"] = round_index
                print(json.dumps(result), flush=True)
                phases.append(result)
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--baseline-commit", help="recorded for a baseline that is no git checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--victim-connections", type=int, default=2)
    parser.add_argument("--lines", type=int, default=2000, help="lines per flood request")
    parser.add_argument("--line-bytes", type=int, default=100, help="each line, its newline too")
    parser.add_argument("--out", type=Path, default=RESULTS / "log_flood.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="log-flood-") as scratch:
        platforms = [
            Platform("baseline", args.baseline.resolve(), Path(scratch), args),
            Platform("this", ROOT, Path(scratch), args),
        ]
        try:
            load_before = load_average()
            phases = asyncio.run(run(platforms, args))
        finally:
            for platform in platforms:
                platform.stop()
    # This machine's paths stay out of the record: the baseline is named by its commit.
    argv = ["<checkout>" if a == str(args.baseline) else a for a in sys.argv[1:]]
    result = {
        "command": " ".join(["PYTHONPATH=. python -m bench.log_flood", *argv]),
        "commits": {
            "baseline": args.baseline_commit or checkout_commit(args.baseline),
            "this": checkout_commit(ROOT),
        },
        "machine": {"cpu_count": os.cpu_count(), "load_before": load_before},
        "load_after": load_average(),
        "args": {k: v for k, v in vars(args).items() if not isinstance(v, Path)},
        "summary": summary(phases),
        "phases": phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for row in result["summary"]:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
