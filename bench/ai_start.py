"""What the path in front of the model adds to time to first token, measured without a model.

    PYTHONPATH=. python -m bench.ai_start [--bursts 64,16,1] [--rounds 7]

``bench/ai.py`` measures TTFT against the real model server, where a 64-request burst's own
prefill (hundreds of ms, swinging between rounds) hides the few ms the runtime adds. Here the
replica is ``bench/ai_stub.py``, which answers every request at once with one token, so what a
client waits for is only the path: **direct** (the stub itself), **REST** (``ember dev``'s
``ai/run``: gateway and pool) and **handler** (a worker whose ``env.AI.run`` stream is its
response). For each burst of N requests sent at once, per path (order alternating per round):

- *arrival*: when each request reached the stub, from the client's send (both read
  ``CLOCK_MONOTONIC``); ``last_arrival_ms`` is the burst's last one: the serial start cost of N
  requests, the lead's hypothesis for the TTFT the handler adds at 16 and 64 streams;
- *TTFT* (first token at the client) p50 and max;
- CPU of the ``ember dev`` supervisor and of its isolate per request (from /proc), and of this
  client (httpx), which shares the machine's cores with them.

Medians over rounds. Writes ``bench/results/ai_start.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bench import ai as base
from bench import ai_paired as paired
from bench.ai_load import load_average
from ember.models.pool.launch import free_port

OUT = base.RESULTS / "ai_start.json"


def _servers(
    work: Path, code: Path
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], int, int]:
    """The stub replica, and ``ember dev`` running the ember package found under ``code``."""
    stub_port, dev_port = free_port(), free_port()
    stub = subprocess.Popen(
        [sys.executable, "-m", "bench.ai_stub", "--port", str(stub_port), "--model", base.MODEL],
        env=base._env(),
    )
    project = base.bench_project(work, stub_port)
    command = [sys.executable, "-m", "ember", "dev", str(project), "--port", str(dev_port)]
    dev = subprocess.Popen(
        [*command, "--no-watch"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**base._env(), "PYTHONPATH": str(code)},
        # ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH: run
        # from ``code``, or a --baseline session would import this checkout's ember instead.
        cwd=code,
    )
    return stub, dev, stub_port, dev_port


async def _one(client: httpx.AsyncClient, url: str, body: dict) -> tuple[float, float]:
    """(send time, TTFT) of one streamed request, CLOCK_MONOTONIC seconds."""
    sent = time.monotonic()
    async with client.stream("POST", url, json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        ttft = 0.0
        async for chunk in response.aiter_raw():
            if not ttft and b'"x"' in chunk:
                ttft = time.monotonic() - sent
    if not ttft:
        raise RuntimeError("no token in the answer")
    return sent, ttft


async def _one_raw(url: str, body: dict) -> tuple[float, float]:
    """``_one`` on a bare asyncio connection: a load generator that costs little CPU.

    httpx spends a few ms of CPU per request here, more than ember does, on the same cores.
    This sends the same request (its own connection, as a fresh httpx client would) and reads
    the chunked answer to its end, looking only for the token's bytes.
    """
    parts = urlsplit(url)
    payload = json.dumps(body).encode()
    head = (
        f"POST {parts.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode()
    sent = time.monotonic()
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(head + payload)
        seen, ttft = b"", 0.0
        while not seen.endswith(b"0\r\n\r\n"):
            data = await reader.read(65536)
            if not data:
                raise RuntimeError("the connection closed before the answer ended")
            seen = seen[-16:] + data
            if not ttft and b'"x"' in seen:
                ttft = time.monotonic() - sent
        if not ttft:
            raise RuntimeError("no token in the answer")
    finally:
        writer.close()
    return sent, ttft


async def _burst(
    url: str, body: dict, n: int, stub_port: int, tag: str, client_kind: str = "httpx"
) -> dict:
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        bodies = [{**body, "user": f"{tag}-{i}"} for i in range(n)]
        cpu = time.process_time()
        if client_kind == "raw":
            results = await asyncio.gather(*(_one_raw(url, b) for b in bodies))
        else:
            results = await asyncio.gather(*(_one(client, url, b) for b in bodies))
        cpu = time.process_time() - cpu
        arrivals = (await client.get(f"http://127.0.0.1:{stub_port}/arrivals")).json()
    first_sent = min(sent for sent, _ in results)
    delays = sorted(
        (arrivals[b["user"]] - sent) * 1000 for b, (sent, _) in zip(bodies, results, strict=True)
    )
    ttfts = sorted(ttft * 1000 for _, ttft in results)
    return {
        "arrival_p50_ms": round(delays[len(delays) // 2], 3),
        "last_arrival_ms": round((max(arrivals.values()) - first_sent) * 1000, 3),
        "ttft_p50_ms": round(ttfts[len(ttfts) // 2], 3),
        "ttft_max_ms": round(ttfts[-1], 3),
        "client_cpu_s": round(cpu, 4),  # this load generator, on the same cores as ember
    }


def _wait_dev(url: str, body: dict, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.post(url, json=body, timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer 200 in {timeout} s")
        time.sleep(0.3)


def _measure(
    targets: dict[str, str], dev_pid: int, stub_port: int, args: argparse.Namespace, rounds: int
) -> list[dict]:
    body = base.request_body(1)
    isolates = paired._children(dev_pid)
    rows = []
    for n in args.bursts:
        for round_index in range(rounds):
            order = list(targets) if round_index % 2 else list(reversed(targets))
            for path in order:
                payload = {**body, "model": base.MODEL} if path == "direct" else body
                before = (paired._cpu(dev_pid), sum(paired._cpu(p) for p in isolates))
                row = asyncio.run(_burst(targets[path], payload, n, stub_port, path, args.client))
                after = (paired._cpu(dev_pid), sum(paired._cpu(p) for p in isolates))
                row.update(path=path, burst=n, round=round_index)
                row["supervisor_cpu_s"] = round(after[0] - before[0], 3)
                row["isolate_cpu_s"] = round(after[1] - before[1], 3)
                rows.append(row)
                print(f"  {row}", flush=True)
    return rows


def _summary(rows: list[dict], bursts: list[int], paths: list[str]) -> dict:
    """Medians over rounds; CPU per request from the totals (the clock ticks every 10 ms)."""
    out = {}
    for n in bursts:
        for path in paths:
            mine = [r for r in rows if (r["path"], r["burst"]) == (path, n)]
            entry = {
                key: round(statistics.median(r[key] for r in mine), 3)
                for key in ("arrival_p50_ms", "last_arrival_ms", "ttft_p50_ms", "ttft_max_ms")
            }
            requests = n * len(mine)
            for part in ("supervisor", "isolate", "client"):
                seconds = sum(r[f"{part}_cpu_s"] for r in mine)
                entry[f"{part}_cpu_ms_per_request"] = round(seconds * 1000 / requests, 3)
            if path != "direct":  # per round, against the direct burst of the same round
                direct = {
                    (r.get("session", 0), r["round"]): r["ttft_p50_ms"]
                    for r in rows
                    if (r["path"], r["burst"]) == ("direct", n)
                }
                added = [
                    r["ttft_p50_ms"] - direct[(r.get("session", 0), r["round"])]
                    for r in mine
                    if (r.get("session", 0), r["round"]) in direct
                ]
                entry["ttft_added_p50_ms"] = round(statistics.median(added), 3)
            out[f"{path}@{n}"] = entry
    return out


def _session(code: Path, args: argparse.Namespace, rounds: int) -> list[dict]:
    """Fresh servers running ``code``; ``rounds`` rounds of every burst size."""
    with tempfile.TemporaryDirectory() as scratch:
        stub, dev, stub_port, dev_port = _servers(Path(scratch), code)
        try:
            base._wait_http(f"http://127.0.0.1:{stub_port}/health")
            targets = {
                "direct": f"http://127.0.0.1:{stub_port}/v1/chat/completions",
                "rest": f"http://127.0.0.1:{dev_port}/client/v4/accounts/local/ai/run/{base.MODEL}",
                "runtime": f"http://127.0.0.1:{dev_port}/",
            }
            body = base.request_body(1)
            _wait_dev(targets["runtime"], body)
            for url in targets.values():  # warm: the isolate, the pool, its connections
                warm = {**body, "model": base.MODEL}
                asyncio.run(_burst(url, warm, max(args.bursts), stub_port, "w", args.client))
            return _measure(targets, dev.pid, stub_port, args, rounds)
        finally:
            base._stop(dev)
            base._stop(stub)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--bursts", type=lambda s: [int(v) for v in s.split(",")], default=[64, 16, 1]
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of ember: alternate sessions of its code and this one's",
    )
    parser.add_argument("--sessions", type=int, default=6, help="per side, with --baseline")
    parser.add_argument(
        "--client",
        choices=["httpx", "raw"],
        default="httpx",
        help="the load generator: httpx (as bench/ai.py) or a bare asyncio one (less CPU)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "client": args.client,
        "load_average_before": load_average(),
    }
    paths = ["direct", "rest", "runtime"]
    if args.baseline is None:
        data["rows"] = _session(base.ROOT, args, args.rounds)
        data["medians"] = _summary(data["rows"], args.bursts, paths)
    else:
        # Code A/B on a shared box: whole sessions alternate, so both sides see the same load.
        sides = {"baseline": args.baseline.resolve(), "this": base.ROOT}
        rows: dict[str, list[dict]] = {side: [] for side in sides}
        for index in range(args.sessions):
            for side in sides if index % 2 == 0 else reversed(list(sides)):
                for row in _session(sides[side], args, args.rounds):
                    rows[side].append({**row, "session": index})
        data["baseline"] = args.baseline.name  # (no absolute path in the results)
        data["rows"] = rows
        data["medians"] = {side: _summary(rows[side], args.bursts, paths) for side in sides}
    data["load_average_after"] = load_average()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data["medians"], indent=2))


if __name__ == "__main__":
    main()
