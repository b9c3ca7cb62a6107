"""``bench.ai``'s pool sections: scaling (a ``ModelPool`` launching 1, then 2 CPU replicas,
driven at 16 and 64 concurrent streams) and recovery (two replicas under a steady load of 4
streams; one replica SIGKILLed while it streams: when its in-flight request fails, when it is
ready again, and how many requests started meanwhile failed)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from pathlib import Path

from bench.ai import MODEL, _requests, request_body
from bench.ai_load import Phase, RequestTiming


async def _pool_phase(pool, body: dict, concurrency: int, per_worker: int) -> Phase:  # noqa: ANN001
    from ember.models.pool.pool import RequestOptions

    phase = Phase(concurrency, 0.0)

    async def worker() -> None:
        for wave in range(per_worker):
            started = time.perf_counter()
            ttft, tokens = 0.0, 0
            try:
                stream = await pool.stream(MODEL, "/v1/chat/completions", body, RequestOptions())
                async for data in stream:
                    if data == "[DONE]":
                        continue
                    payload = json.loads(data)
                    if not ttft and payload.get("choices") and payload["choices"][0]["delta"]:
                        if any(
                            payload["choices"][0]["delta"].get(k)
                            for k in ("content", "reasoning_content")
                        ):
                            ttft = time.perf_counter() - started
                    if isinstance(payload.get("usage"), dict):
                        tokens = payload["usage"]["completion_tokens"]
                elapsed = time.perf_counter() - started
                phase.timings.append(RequestTiming(ttft, elapsed, tokens, wave))
            except Exception as exc:  # recorded, the phase goes on
                phase.errors.append(str(exc)[:300])

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    phase.wall = time.perf_counter() - started
    return phase


def _pool(ckpt: Path, replicas: int, server_args: list[str], **settings: float):  # noqa: ANN202
    from ember.models.pool.config import parse_pool_config
    from ember.models.pool.pool import ModelPool

    models = {MODEL: {"checkpoint": str(ckpt), "replicas": replicas, "args": server_args}}
    return ModelPool(parse_pool_config(models, settings or None), progress=lambda line: None)


def scaling(ckpt: Path, args: argparse.Namespace) -> list[dict]:
    body = {
        **request_body(args.max_tokens),
        "model": MODEL,
        "stream_options": {"include_usage": True},
    }
    rows = []

    async def measure(replicas: int) -> None:
        pool = _pool(ckpt, replicas, args.server_args)
        try:
            assert await pool.wait_ready(MODEL, 300)
            while not all(r.state.value == "ready" for r in pool.group(MODEL).replicas):
                await asyncio.sleep(0.1)
            await _pool_phase(pool, body, 2, 2)
            for concurrency in (16, 64):
                for round_index in range(args.rounds):
                    phase = await _pool_phase(
                        pool, body, concurrency, max(1, _requests(args, concurrency) // concurrency)
                    )
                    rows.append({"replicas": replicas, "round": round_index, **phase.summary()})
                    print(f"  replicas={replicas} c={concurrency:<3} {phase.summary()}", flush=True)
        finally:
            await pool.aclose()

    for replicas in (1, 2):
        asyncio.run(measure(replicas))
    return rows


def recovery(ckpt: Path, args: argparse.Namespace) -> list[dict]:
    body = {**request_body(64), "model": MODEL, "stream_options": {"include_usage": True}}

    async def main() -> list[dict]:
        from ember.models.pool.pool import RequestOptions

        pool = _pool(ckpt, 2, args.server_args, health_interval_s=0.25, restart_backoff_s=0.25)
        results = []
        try:
            assert await pool.wait_ready(MODEL, 300)
            while not all(r.state.value == "ready" for r in pool.group(MODEL).replicas):
                await asyncio.sleep(0.1)
            for trial in range(args.rounds):
                stop = asyncio.Event()
                started_after_kill: list[bool] = []
                kill_time = [0.0]

                async def background(
                    stop: asyncio.Event, kill_time: list[float], started_after_kill: list[bool]
                ) -> None:
                    while not stop.is_set():
                        began = time.perf_counter()
                        try:
                            stream = await pool.stream(
                                MODEL, "/v1/chat/completions", body, RequestOptions()
                            )
                            async for _ in stream:
                                pass
                            ok = True
                        except Exception:
                            ok = False
                        if kill_time[0] and began > kill_time[0]:
                            started_after_kill.append(ok)

                load = [
                    asyncio.ensure_future(background(stop, kill_time, started_after_kill))
                    for _ in range(4)
                ]
                await asyncio.sleep(1.0)
                victim_stream = await pool.stream(
                    MODEL, "/v1/chat/completions", body, RequestOptions()
                )
                await victim_stream.__anext__()
                victim = victim_stream.replica
                os.killpg(victim.process.pid, signal.SIGKILL)
                kill_time[0] = time.perf_counter()
                try:
                    async for _ in victim_stream:
                        pass
                    failed_after = None
                except Exception:
                    failed_after = time.perf_counter() - kill_time[0]
                while victim.state.value != "ready":
                    await asyncio.sleep(0.02)
                ready_after = time.perf_counter() - kill_time[0]
                stop.set()
                await asyncio.gather(*load)
                row = {
                    "trial": trial,
                    "in_flight_failed_after_s": round(failed_after, 4) if failed_after else None,
                    "replica_ready_again_after_s": round(ready_after, 3),
                    "requests_started_after_kill": len(started_after_kill),
                    "of_which_failed": started_after_kill.count(False),
                }
                print(f"  recovery {row}", flush=True)
                results.append(row)
        finally:
            await pool.aclose()
        return results

    return asyncio.run(main())
