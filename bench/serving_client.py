"""The serving benchmark's client, in the manner of SGLang's ``bench_serving``: a closed loop of
``concurrency`` workers, each sending its next request as soon as its last one finished, against
an OpenAI-compatible ``/v1/completions`` (token-id prompts, fixed ``max_tokens`` with
``ignore_eos``, greedy).

Per request it records the time to the first streamed chunk (TTFT), the gaps between chunks
(ITL), the end-to-end latency and the token counts from the usage chunk. The client stays light
on purpose (it shares the cores with the server): it splits the SSE stream on blank lines and
parses JSON only for the usage chunk.

Summary figures follow ``bench_serving``: output tokens/s = output tokens / wall time (first
request sent to last one finished), TTFT and E2E mean/p50/p99, ITL mean/p50/p99 over every gap of
every request, TPOT = (E2E - TTFT) / (tokens - 1), and the achieved concurrency (sum of request
times / wall time).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field

import httpx


@dataclass(slots=True)
class RequestResult:
    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    e2e: float = 0.0
    itls: list[float] = field(default_factory=list)
    error: str | None = None


@dataclass(slots=True)
class RunResult:
    requests: list[RequestResult]
    wall: float
    concurrency: int
    stream: bool


async def _one(client: httpx.AsyncClient, body: dict, stream: bool) -> RequestResult:
    start = time.perf_counter()
    try:
        if not stream:
            response = await client.post("/v1/completions", json=body)
            end = time.perf_counter()
            if response.status_code != 200:
                return RequestResult(False, error=f"{response.status_code} {response.text[:200]}")
            usage = response.json()["usage"]
            return RequestResult(
                True,
                usage["prompt_tokens"],
                usage["completion_tokens"],
                ttft=end - start,
                e2e=end - start,
            )
        result = RequestResult(True)
        last = 0.0
        async with client.stream("POST", "/v1/completions", json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")
                return RequestResult(False, error=f"{response.status_code} {text[:200]}")
            buffer = b""
            async for data in response.aiter_raw():
                buffer += data
                *events, buffer = buffer.split(b"\n\n")
                now = time.perf_counter()
                for event in events:
                    if not event.startswith(b"data: ") or event == b"data: [DONE]":
                        continue
                    if b'"usage":{' in event and b'"choices":[]' in event:
                        usage = json.loads(event[6:])["usage"]
                        result.prompt_tokens = usage["prompt_tokens"]
                        result.output_tokens = usage["completion_tokens"]
                        continue
                    if b'"error"' in event[:20]:
                        result.ok, result.error = False, event.decode(errors="replace")[:200]
                        continue
                    if last == 0.0:
                        result.ttft = now - start
                    else:
                        result.itls.append(now - last)
                    last = now
        result.e2e = time.perf_counter() - start
        return result
    except httpx.HTTPError as error:
        return RequestResult(False, error=repr(error))


async def run_closed_loop(
    url: str,
    prompts: list[list[int]],
    *,
    model: str,
    max_tokens: int,
    concurrency: int,
    num_requests: int,
    stream: bool = True,
    timeout: float = 1800.0,
) -> RunResult:
    """``num_requests`` requests (prompts taken in order, cycling), ``concurrency`` in flight."""
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency)
    results: list[RequestResult] = []
    counter = iter(range(num_requests))

    def body(index: int) -> dict:
        out = {
            "model": model,
            "prompt": prompts[index % len(prompts)],
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": stream,
        }
        if stream:
            out["stream_options"] = {"include_usage": True}
        return out

    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:

        async def worker() -> None:
            for index in counter:
                results.append(await _one(client, body(index), stream))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
    return RunResult(results, wall, concurrency, stream)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _stats(values: list[float], scale: float = 1000.0) -> dict[str, float]:
    if not values:
        return {"mean": float("nan"), "p50": float("nan"), "p99": float("nan")}
    return {
        "mean": statistics.fmean(values) * scale,
        "p50": _percentile(values, 0.5) * scale,
        "p99": _percentile(values, 0.99) * scale,
    }


def summarize(run: RunResult) -> dict:
    """bench_serving's figures (times in ms)."""
    done = [r for r in run.requests if r.ok]
    output = sum(r.output_tokens for r in done)
    itls = [gap for r in done for gap in r.itls]
    tpot = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in done if r.output_tokens > 1]
    return {
        "concurrency": run.concurrency,
        "stream": run.stream,
        "completed": len(done),
        "failed": len(run.requests) - len(done),
        "errors": sorted({r.error for r in run.requests if r.error})[:3],
        "wall_s": run.wall,
        "input_tokens": sum(r.prompt_tokens for r in done),
        "output_tokens": output,
        "request_throughput": len(done) / run.wall,
        "output_tokens_per_s": output / run.wall,
        "achieved_concurrency": sum(r.e2e for r in done) / run.wall,
        "ttft_ms": _stats([r.ttft for r in done]),
        "itl_ms": _stats(itls),
        "tpot_ms": _stats(tpot),
        "e2e_ms": _stats([r.e2e for r in done]),
    }
