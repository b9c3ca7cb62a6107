"""TTFT of a burst that reaches the model server spread over time, two checkouts' servers A/B.

    PYTHONPATH=. python -m bench.ai_spread --baseline ../main-checkout [--rounds 6]

Through ember, a burst of N streaming requests reaches the model server one by one (the
supervisor starts them serially: ~0.5 ms each, plus the isolate's hop), where a client sending
straight to the server delivers it within a few ms. This isolates what the server does with
such a burst: a bare asyncio client (little CPU, so the box's load matters less) holds N
kept-alive connections to each server and sends the same chat request (``bench.ai``'s: 32
completion tokens, ``ignore_eos``) on each, ``--spread-ms`` apart, then reads every answer to its
end. Per burst: TTFT p50 and max (from each request's own send to its first content token) and
the time from the first send to the last first token. Servers: the baseline checkout's and this
one's (``ember models serve``, the settings of ``bench.ai``), bursts alternating between them in
an order that flips each round. Writes ``bench/results/ai_spread.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ai import (  # noqa: E402
    MODEL,
    SERVER_ARGS,
    _median,
    _stop,
    _wait_http,
    bench_project,
    checkpoint,
    request_body,
)
from bench.ai_load import checkout_commit, load_average  # noqa: E402
from ember.models.pool.launch import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results"
_TOKEN = re.compile(rb'"(?:reasoning_)?content":"[^"]')  # a delta that carries text
_END = b"data: [DONE]"


def _server(code: Path, ckpt: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ember", "models", "serve", str(ckpt), "--port", str(port)]
        + ["--served-model-name", MODEL, *SERVER_ARGS, "--max-running-requests", "128"],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, port


async def _one(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes, at: float
) -> tuple[float, float]:
    """Send at ``at`` (monotonic); (send time, first-token time), reading the answer to its end."""
    reader, writer = connection
    delay = at - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    sent = time.monotonic()
    writer.write(request)
    first, seen = 0.0, b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        seen = seen[-64:] + chunk
        if not first and _TOKEN.search(seen):
            first = time.monotonic()
        if _END in seen and seen.rstrip().endswith(b"0"):  # [DONE] and the last chunk's 0
            return sent, first


async def _burst(port: int, request: bytes, streams: int, spread_s: float) -> dict:
    # Fresh connections per burst, opened before the clock starts (servers close idle ones).
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(streams)]
    start = time.monotonic() + 0.01
    try:
        timings = await asyncio.gather(
            *(_one(conns[i], request, start + i * spread_s) for i in range(streams))
        )
    finally:
        for _, writer in conns:
            writer.close()
    ttfts = sorted((first - sent) * 1000 for sent, first in timings)
    last_first = max(first for _, first in timings)
    return {
        "ttft_p50_ms": round(ttfts[len(ttfts) // 2], 2),
        "ttft_max_ms": round(ttfts[-1], 2),
        "burst_to_last_first_token_ms": round((last_first - start) * 1000, 2),
    }


def _http(port: int, path: str, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def _dev(code: Path, work: Path, server_port: int) -> tuple[subprocess.Popen[bytes], int]:
    """``ember dev`` of ``bench.ai``'s worker project, attached to the server on the port."""
    port = free_port()
    work.mkdir()
    project = bench_project(work, server_port)
    process = subprocess.Popen(
        [sys.executable, "-m", "ember", "dev", str(project), "--port", str(port), "--no-watch"],
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, port


def _compare(rows: list[dict], kinds: list[tuple[str, float]], rounds: int) -> list[dict]:
    """Per (path, spread): medians per side and of this - baseline in the same round; per side,
    what the handler adds to the direct burst (spread 0) in the same round."""
    keys = ("ttft_p50_ms", "ttft_max_ms", "burst_to_last_first_token_ms")

    def value(side: str, path: str, spread: float, index: int, key: str) -> float | None:
        for r in rows:
            if (r["side"], r["path"], r["spread_ms"], r["round"]) == (side, path, spread, index):
                return r[key]
        return None

    out = []
    for path, spread in kinds:
        entry: dict = {"path": path, "spread_ms": spread}
        for key in keys:
            for side in ("baseline", "this"):
                values = [value(side, path, spread, i, key) for i in range(rounds)]
                entry[f"{side}_{key}"] = round(_median([v for v in values if v is not None]), 2)
            diffs = [
                value("this", path, spread, i, key) - value("baseline", path, spread, i, key)
                for i in range(rounds)
            ]
            entry[f"this_minus_baseline_{key}"] = round(_median(diffs), 2)
            if path == "handler":
                for side in ("baseline", "this"):
                    added = [
                        value(side, path, spread, i, key) - value(side, "direct", 0.0, i, key)
                        for i in range(rounds)
                    ]
                    entry[f"{side}_handler_adds_{key}"] = round(_median(added), 2)
        out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument(
        "--spread-ms", type=lambda s: [float(v) for v in s.split(",")], default=[0.0, 0.5, 1.0]
    )
    parser.add_argument(
        "--handler",
        action="store_true",
        help="also send each burst at once through an ember dev handler (env.AI.run) per side",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "ai_spread.json")
    args = parser.parse_args()
    body = request_body(32)
    direct_body = {**body, "model": MODEL, "stream_options": {"include_usage": True}}
    kinds = [("direct", spread) for spread in args.spread_ms]
    if args.handler:
        kinds.append(("handler", 0.0))
        if 0.0 not in args.spread_ms:
            kinds.insert(0, ("direct", 0.0))
    rows: list[dict] = []
    loads = [load_average()]
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as scratch:
        ckpt = checkpoint(Path(scratch))
        targets: dict[tuple[str, str], bytes] = {}
        ports: dict[tuple[str, str], int] = {}
        try:
            for side, code in (("baseline", args.baseline.resolve()), ("this", ROOT)):
                server, port = _server(code, ckpt)
                processes.append(server)
                ports[side, "direct"] = port
                targets[side, "direct"] = _http(port, "/v1/chat/completions", direct_body)
                if args.handler:
                    dev, dev_port = _dev(code, Path(scratch) / side, port)
                    processes.append(dev)
                    ports[side, "handler"] = dev_port
                    targets[side, "handler"] = _http(dev_port, "/", body)
            for side in ("baseline", "this"):
                _wait_http(f"http://127.0.0.1:{ports[side, 'direct']}/health")

            async def run() -> None:
                for key in ports:  # warm: the isolate, the pool's connections to the server
                    await _burst(ports[key], targets[key], args.streams, 0.0)
                for round_index in range(args.rounds):
                    for path, spread in kinds:
                        sides = ["baseline", "this"]
                        if round_index % 2:
                            sides.reverse()
                        for side in sides:
                            key = (side, path)
                            result = await _burst(
                                ports[key], targets[key], args.streams, spread / 1000
                            )
                            row = {"side": side, "path": path, "round": round_index}
                            rows.append({**row, "spread_ms": spread, **result})
                            print(rows[-1], flush=True)
                    loads.append(load_average())

            asyncio.run(run())
        finally:
            for process in reversed(processes):
                _stop(process)
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "baseline_commit": checkout_commit(args.baseline),
        "this_commit": checkout_commit(ROOT),
        "settings": {
            "rounds": args.rounds,
            "streams": args.streams,
            "spread_ms": args.spread_ms,
            "handler": args.handler,
        },
        "load_average_per_round": loads,
        "bursts": rows,
        "compare": _compare(rows, kinds, args.rounds),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for entry in data["compare"]:
        print(json.dumps(entry))


if __name__ == "__main__":
    main()
