"""Two checkouts' ``ember serve`` platforms measured against each other, their phases alternating
round by round so both run under the same load: the part ``bench/log_flood.py`` and
``bench/kv_flood.py`` share.

    parser = ab_arguments(__doc__, RESULTS / "kv_flood.json")      # --baseline, --rounds, ...
    args = parser.parse_args()
    run_ab("bench.kv_flood", args, Platform, KINDS, METRICS, phase)  # alternate, record

A ``ServePlatform`` starts one checkout's ``ember serve`` (its own state dir, a free port) and
creates accounts on it; subclasses deploy their workers (``deploy``: an account and its workers).
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
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import httpx

from bench.ai_load import checkout_commit, load_average

ROOT = Path(__file__).resolve().parents[1]
P = TypeVar("P", bound="ServePlatform")


class ServePlatform:
    """One checkout's ``ember serve`` on a free loopback port."""

    def __init__(self, name: str, code: Path, scratch: Path) -> None:
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

    def account(self, name: str) -> tuple[str, dict[str, str]]:
        """A new permanent account: its API base URL and its token's header."""
        created = subprocess.run(
            [sys.executable, "-m", "ember", "accounts", "create", name, "--json"]
            + ["--state-dir", str(self.state)],
            cwd=self.code,
            env=self.env,
            capture_output=True,
            check=True,
        )
        made = json.loads(created.stdout)
        base = f"http://127.0.0.1:{self.port}/client/v4/accounts/{made['id']}"
        return base, {"authorization": f"Bearer {made['token']}"}

    def deploy(self, account: str, workers: dict[str, str]) -> None:
        """A new permanent account ``account`` with ``workers`` (name -> source) uploaded."""
        from tests.serve.conftest import upload  # the upload body a deploy sends

        base, auth = self.account(account)
        for name, source in workers.items():
            body, headers = upload(source)
            reply = httpx.put(
                f"{base}/workers/scripts/{name}", content=body, headers=headers | auth, timeout=120
            )
            assert reply.status_code == 200, reply.text

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def alternate(
    platforms: Sequence[P],
    kinds: Sequence[str],
    phase: Callable[[P, str, argparse.Namespace], Awaitable[dict]],
    args: argparse.Namespace,
) -> list[dict]:
    """A 1-second warm-up phase of each kind per platform, then ``args.rounds`` rounds of every
    kind on each, the platforms' order reversed every other round."""
    for platform in platforms:  # warm: every isolate started, the client's path taken once
        warm = argparse.Namespace(**{**vars(args), "seconds": 1.0})
        for kind in kinds:
            await phase(platform, kind, warm)
    phases = []
    for round_index in range(args.rounds):
        order = platforms if round_index % 2 == 0 else platforms[::-1]
        for platform in order:
            for kind in kinds:
                result = await phase(platform, kind, args)
                result["round"] = round_index
                print(json.dumps(result), flush=True)
                phases.append(result)
    return phases


def median_summary(phases: list[dict], kinds: Sequence[str], metrics: Sequence[str]) -> list[dict]:
    """Per side and kind, the median over rounds of each metric."""
    out = []
    for side, kind in itertools.product(("baseline", "this"), kinds):
        rows = [p for p in phases if p["side"] == side and p["kind"] == kind]
        if not rows:
            continue
        row: dict = {"side": side, "kind": kind, "rounds": len(rows)}
        for key in metrics:
            row[key] = round(statistics.median(r[key] for r in rows), 2)
        out.append(row)
    return out


def write_record(
    module: str, args: argparse.Namespace, phases: list[dict], summary: list[dict], load: object
) -> None:
    """``args.out``: the command, both commits, the machine, the summary and every phase."""
    # This machine's paths stay out of the record: the baseline is named by its commit.
    argv = ["<checkout>" if a == str(args.baseline) else a for a in sys.argv[1:]]
    result = {
        "command": " ".join([f"PYTHONPATH=. python -m {module}", *argv]),
        "commits": {
            "baseline": args.baseline_commit or checkout_commit(args.baseline),
            "this": checkout_commit(ROOT),
        },
        "machine": {"cpu_count": os.cpu_count(), "load_before": load},
        "load_after": load_average(),
        "args": {k: v for k, v in vars(args).items() if not isinstance(v, Path)},
        "summary": summary,
        "phases": phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for row in summary:
        print(json.dumps(row))


def ab_arguments(doc: str | None, out: Path, seconds: float = 8.0) -> argparse.ArgumentParser:
    """The options every platform A/B takes; a bench adds its own."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--baseline-commit", help="recorded for a baseline that is no git checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=seconds)
    parser.add_argument("--out", type=Path, default=out)
    return parser


def run_ab(
    module: str,
    args: argparse.Namespace,
    make: Callable[[str, Path, Path, argparse.Namespace], P],
    kinds: Sequence[str],
    metrics: Sequence[str],
    phase: Callable[[P, str, argparse.Namespace], Awaitable[dict]],
) -> None:
    """Start the baseline's platform and this checkout's, alternate their phases, stop both,
    and write the record."""
    prefix = module.rsplit(".", 1)[-1].replace("_", "-") + "-"
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        platforms = [
            make("baseline", args.baseline.resolve(), Path(scratch), args),
            make("this", ROOT, Path(scratch), args),
        ]
        try:
            load_before = load_average()
            phases = asyncio.run(alternate(platforms, kinds, phase, args))
        finally:
            for platform in platforms:
                platform.stop()
    write_record(module, args, phases, median_summary(phases, kinds, metrics), load_before)


async def keepalive_client(
    port: int,
    host: str,
    path: str,
    stop: asyncio.Event,
    latencies: list[float] | None = None,
) -> int:
    """GETs of ``path`` to ``host`` one after the other on one keep-alive connection until
    ``stop``; each answer must be a 200. Returns how many; ``latencies`` gets each one's ms."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    try:
        while not stop.is_set():
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length)
            assert head.startswith(b"HTTP/1.1 200"), head + body
            if latencies is not None:
                latencies.append((time.perf_counter() - started) * 1e3)
            done += 1
    finally:
        writer.close()
    return done
