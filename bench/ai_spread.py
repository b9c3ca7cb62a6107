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
    checkpoint,
    request_body,
)
from bench.ai_load import load_average  # noqa: E402
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


async def _burst(port: int, request: bytes, streams: int, spread_s: float, conns: list) -> dict:
    start = time.monotonic() + 0.01
    timings = await asyncio.gather(
        *(_one(conns[i], request, start + i * spread_s) for i in range(streams))
    )
    ttfts = sorted((first - sent) * 1000 for sent, first in timings)
    last_first = max(first for _, first in timings)
    return {
        "ttft_p50_ms": round(ttfts[len(ttfts) // 2], 2),
        "ttft_max_ms": round(ttfts[-1], 2),
        "burst_to_last_first_token_ms": round((last_first - start) * 1000, 2),
    }


async def _connect(port: int, streams: int) -> list:
    return [await asyncio.open_connection("127.0.0.1", port) for _ in range(streams)]


def _http(port: int, body: dict) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument(
        "--spread-ms", type=lambda s: [float(v) for v in s.split(",")], default=[0.0, 0.5, 1.0]
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "ai_spread.json")
    args = parser.parse_args()
    body = {**request_body(32), "model": MODEL, "stream_options": {"include_usage": True}}
    rows: list[dict] = []
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as scratch:
        ckpt = checkpoint(Path(scratch))
        servers = {
            "baseline": _server(args.baseline.resolve(), ckpt),
            "this": _server(ROOT, ckpt),
        }
        try:
            for _, port in servers.values():
                _wait_http(f"http://127.0.0.1:{port}/health")

            async def run() -> None:
                conns = {
                    name: await _connect(port, args.streams) for name, (_, port) in servers.items()
                }
                for name, (_, port) in servers.items():  # warm
                    await _burst(port, _http(port, body), args.streams, 0.0, conns[name])
                for round_index in range(args.rounds):
                    for spread in args.spread_ms:
                        names = list(servers)
                        if round_index % 2:
                            names.reverse()
                        for name in names:
                            port = servers[name][1]
                            result = await _burst(
                                port, _http(port, body), args.streams, spread / 1000, conns[name]
                            )
                            row = {"side": name, "round": round_index, "spread_ms": spread}
                            rows.append({**row, **result})
                            print(rows[-1], flush=True)
                    loads.append(load_average())

            asyncio.run(run())
        finally:
            for process, _ in servers.values():
                _stop(process)
    compare = []
    for spread in args.spread_ms:
        entry: dict = {"spread_ms": spread}
        for key in ("ttft_p50_ms", "ttft_max_ms", "burst_to_last_first_token_ms"):
            for side in ("baseline", "this"):
                values = [r[key] for r in rows if r["side"] == side and r["spread_ms"] == spread]
                entry[f"{side}_{key}"] = round(_median(values), 2)
            diffs = []
            for index in range(args.rounds):
                pair = {
                    r["side"]: r[key]
                    for r in rows
                    if r["round"] == index and r["spread_ms"] == spread
                }
                diffs.append(pair["this"] - pair["baseline"])
            entry[f"this_minus_baseline_{key}"] = round(_median(diffs), 2)
        compare.append(entry)
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "baseline": str(args.baseline),
        "settings": {"rounds": args.rounds, "streams": args.streams, "spread_ms": args.spread_ms},
        "load_average_per_round": loads,
        "bursts": rows,
        "compare": compare,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    for entry in compare:
        print(json.dumps(entry))


if __name__ == "__main__":
    main()
