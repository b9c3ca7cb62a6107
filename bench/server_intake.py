"""The model server's event-loop CPU per streamed chat request, ``SSEResponse`` against starlette.

    PYTHONPATH=. python -m bench.server_intake [--rounds 8] [--max-tokens 1]

The model server takes every request in on one event loop, beside the engine thread (intake:
routing, JSON, chat template, tokenizer; then the streamed answer). In a burst that loop is the
bottleneck (``bench.ai_burst_probe``: 64 handler requests reached the server within ~14 ms and
took it 54-68 ms to take in). Here the server's ASGI app runs in this process, against a real
engine in a background thread (``tests/models/server/live.py``: glm4moe-tiny, one torch thread),
and bursts of 16 streaming chat requests (``bench.ai``'s body) are sent straight to the app as
uvicorn would (ASGI spec 2.3, the body already arrived). Rounds alternate ember's
``SSEResponse`` and its reference, starlette's ``StreamingResponse``; per round, the event-loop
thread's CPU per request (``time.thread_time``). Writes ``bench/results/server_intake.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.ai import MODEL, checkpoint, request_body
from ember.models.server import openai_routes, wire
from ember.models.server.app import build_app
from tests.models.server.live import post_as_uvicorn, running_server, server_settings

ROOT = Path(__file__).resolve().parents[1]


def _cpu_per_request(app: object, payload: bytes, bursts: int, streams: int) -> float:
    async def run() -> None:
        for _ in range(bursts):
            path = "/v1/chat/completions"
            calls = (post_as_uvicorn(app, path, payload, keep=False) for _ in range(streams))
            await asyncio.gather(*calls)

    started = time.thread_time()
    asyncio.run(run())
    return (time.thread_time() - started) / (bursts * streams) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--bursts", type=int, default=10, help="bursts per round and side")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/server_intake.json")
    args = parser.parse_args()
    body = {**request_body(args.max_tokens), "model": MODEL}
    body["stream_options"] = {"include_usage": True}
    payload = json.dumps(body).encode()
    sides = {
        "sse_response": functools.partial(wire.sse_response, reference=False),
        "starlette": functools.partial(wire.sse_response, reference=True),
    }
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        settings = server_settings(
            str(checkpoint(Path(scratch))),
            served_model_name=MODEL,
            kv_cache_bytes=256 << 20,
            max_running_requests=128,
        )
        with running_server(settings) as live:
            app = build_app(live.state, load=False)
            _cpu_per_request(app, payload, 2, args.streams)  # warm
            for index in range(args.rounds):
                order = list(sides) if index % 2 == 0 else list(reversed(sides))
                for side in order:
                    openai_routes.sse_response = sides[side]  # type: ignore[assignment]
                    cpu = _cpu_per_request(app, payload, args.bursts, args.streams)
                    rows.append({"round": index, "side": side, "loop_cpu_ms_per_request": cpu})
                    print(f"round {index} {side:<12} {cpu:.3f} ms", flush=True)
    per = {s: [r["loop_cpu_ms_per_request"] for r in rows if r["side"] == s] for s in sides}
    saved = [b - a for a, b in zip(per["sse_response"], per["starlette"], strict=True)]
    data = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "median_ms": {s: round(statistics.median(v), 3) for s, v in per.items()},
        "median_saved_ms": round(statistics.median(saved), 3),
        "rounds_lower_with_sse_response": sum(1 for d in saved if d > 0),
        "rows": rows,
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
