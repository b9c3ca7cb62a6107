"""Load generation for ``bench/ai.py``: concurrent SSE chat streams, timed per request.

A *phase* runs ``concurrency`` workers, each sending ``per_worker`` streaming requests back to
back, and records per request the time to the first token (the first chunk whose delta carries
text) and the completion tokens (from the usage at the end); the phase's throughput is all
completion tokens over its wall time. The same function drives the model server directly
(OpenAI ``/v1/chat/completions``) and a handler calling ``env.AI.run`` (Workers events), so the
two paths are measured by the same client code.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from bench.raw_http import Connection, Target

# (client, request index) -> an async iterator of decoded SSE payloads
Opener = Callable[[httpx.AsyncClient, int], Awaitable[object]]


@dataclass
class RequestTiming:
    ttft: float
    total: float
    tokens: int
    wave: int = 0  # 0: a worker's first request (all start at once); 1+: closed-loop follow-ups


@dataclass
class Phase:
    concurrency: int
    wall: float
    timings: list[RequestTiming] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return sum(t.tokens for t in self.timings) / self.wall if self.wall else 0.0

    def summary(self) -> dict[str, float | int]:
        ttfts = sorted(t.ttft for t in self.timings)
        burst = sorted(t.ttft for t in self.timings if t.wave == 0)
        steady = sorted(t.ttft for t in self.timings if t.wave > 0)
        return {
            "concurrency": self.concurrency,
            "requests": len(self.timings),
            "errors": len(self.errors),
            "wall_s": round(self.wall, 4),
            "tokens": sum(t.tokens for t in self.timings),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "ttft_p50_ms": round(percentile(ttfts, 0.5) * 1000, 3),
            "ttft_p90_ms": round(percentile(ttfts, 0.9) * 1000, 3),
            "ttft_mean_ms": round(statistics.fmean(ttfts) * 1000, 3) if ttfts else 0.0,
            # The first wave starts all at once (a burst); later requests start as earlier ones
            # end (closed loop). Both are reported: a burst queues every request's start.
            "ttft_burst_p50_ms": round(percentile(burst, 0.5) * 1000, 3),
            "ttft_steady_p50_ms": round(percentile(steady, 0.5) * 1000, 3) if steady else None,
        }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[index]


def _has_token(payload: object) -> bool:
    if not isinstance(payload, dict) or not payload.get("choices"):
        return False
    delta = payload["choices"][0].get("delta") or {}
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))


def _usage(payload: object) -> int | None:
    if isinstance(payload, dict) and isinstance(payload.get("usage"), dict):
        return int(payload["usage"].get("completion_tokens") or 0)
    return None


async def _timed_events(pieces: AsyncIterator[bytes], started: float) -> RequestTiming:
    """Read an SSE body to its end: TTFT (first chunk carrying text), completion tokens."""
    ttft = 0.0
    tokens = 0
    buffer = b""
    async for chunk in pieces:
        buffer += chunk
        *blocks, buffer = buffer.split(b"\n\n")
        for block in blocks:
            if not block.startswith(b"data: ") or block == b"data: [DONE]":
                continue
            payload = json.loads(block[6:])
            if isinstance(payload, dict) and (payload.get("errors") or payload.get("error")):
                raise RuntimeError(f"stream error: {payload}")
            if not ttft and _has_token(payload):
                ttft = time.perf_counter() - started
            used = _usage(payload)
            if used is not None:
                tokens = used
    return RequestTiming(ttft, time.perf_counter() - started, tokens)


async def timed_stream(
    client: httpx.AsyncClient, url: str, body: dict, headers: dict | None = None
) -> RequestTiming:
    """POST a streaming request with httpx; its TTFT, total time and completion tokens."""
    started = time.perf_counter()
    async with client.stream("POST", url, json=body, headers=headers or {}) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:300]!r}")
        return await _timed_events(response.aiter_raw(), started)


async def timed_stream_raw(
    connection: Connection, body: dict, headers: dict | None = None
) -> RequestTiming:
    """The same with the bare client (``bench/raw_http.py``) on a kept-alive connection."""
    started = time.perf_counter()
    return await _timed_events(connection.post_stream(body, headers), started)


async def run_phase(
    url: str,
    body: dict,
    concurrency: int,
    per_worker: int,
    headers: Callable[[int], dict] | None = None,
    stagger: bool = False,
    client: str = "raw",
) -> Phase:
    """``concurrency`` workers x ``per_worker`` sequential streaming requests to ``url``.

    With ``stagger``, worker i's first request asks for (i + 1) / concurrency of the body's
    ``max_tokens``: the first wave still starts at once, but it ends spread over a request's
    length, so the follow-ups start one by one, as in a steady closed loop (with equal lengths
    they would all end, and start again, together).

    ``client`` is ``raw`` (one kept-alive bare connection per worker, opened before the clock
    starts) or ``httpx`` (what the benches used until 2026-12-04: it spent more CPU per request
    than ember on this box).
    """
    phase = Phase(concurrency, 0.0)
    target = Target.from_url(url)
    connections = [Connection(target) for _ in range(concurrency)]
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(600.0, connect=10.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:

        async def worker(index: int) -> None:
            for wave in range(per_worker):
                try:
                    extra = headers(index) if headers is not None else None
                    payload = body
                    if stagger and wave == 0 and "max_tokens" in body:
                        share = max(1, body["max_tokens"] * (index + 1) // concurrency)
                        payload = {**body, "max_tokens": share}
                    if client == "raw":
                        timing = await timed_stream_raw(connections[index], payload, extra)
                    else:
                        timing = await timed_stream(http, url, payload, extra)
                    timing.wave = wave
                    phase.timings.append(timing)
                except (httpx.HTTPError, OSError, asyncio.IncompleteReadError, RuntimeError) as exc:
                    phase.errors.append(str(exc)[:300])

        if client == "raw":
            await asyncio.gather(*(connection.open() for connection in connections))
        started = time.perf_counter()
        try:
            await asyncio.gather(*(worker(i) for i in range(concurrency)))
        finally:
            phase.wall = time.perf_counter() - started
            for connection in connections:
                await connection.close()
        return phase


def load_average() -> list[float]:
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return [float(v) for v in handle.read().split()[:3]]
    except OSError:
        return []


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and every live descendant (from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / ticks
    total = 0.0
    for pid, seconds in times.items():
        current, seen = pid, 0
        while current and seen < 64:
            if current == root:
                total += seconds
                break
            current, seen = parents.get(current, 0), seen + 1
    return total


def checkout_commit(path: os.PathLike[str] | str) -> str:
    """The short commit of a checkout (what a JSON records instead of this machine's path)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()
