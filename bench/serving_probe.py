"""What ``bench.serving`` reads off the host and the servers: CPU seconds per process and per
thread, the load average, the processor, a free loopback port, the Prometheus ``/metrics`` text,
the running batch sampled during a run, and the figures an ember server reports of itself."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
from pathlib import Path

import httpx

from bench.serving_client import RunResult, run_closed_loop


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of a process's main thread (ember: the HTTP event loop) and of the others
    together (ember: the engine loop; torch's intra-op threads when there are several)."""
    out = {"main": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        out["main" if task.name == str(pid) else "other"] += seconds
    return out


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {metric name: value} (labels dropped, histogram buckets skipped)."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "_bucket" not in line:
            key, _, value = line.rpartition(" ")
            samples[key.split("{")[0]] = float(value)
    return samples


async def poll_running(url: str, every: float, out: list[float]) -> None:
    """Sample ``sglang:num_running_reqs`` until cancelled (one small GET a second: the server's
    cost is a few hundred microseconds per sample)."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while True:
            await asyncio.sleep(every)
            try:
                response = await client.get("/metrics")
            except httpx.HTTPError:
                continue
            value = parse_metrics(response.text).get("sglang:num_running_reqs")
            if value is not None:
                out.append(value)


async def measured_run(
    url: str, prompts: list[list[int]], *, poll: bool, **kwargs
) -> tuple[RunResult, list[float]]:
    """One closed-loop run, sampling the server's running batch meanwhile when ``poll``."""
    running: list[float] = []
    poller = asyncio.ensure_future(poll_running(url, 1.0, running)) if poll else None
    try:
        run = await run_closed_loop(url, prompts, model="bench", **kwargs)
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
    return run, running


def batch_summary(samples: list[float]) -> dict | None:
    """Median and max of the sampled running batch, the zero samples (idle between waves and
    before the first request) dropped; None when nothing was sampled."""
    busy = sorted(v for v in samples if v > 0)
    if not busy:
        return None
    return {"median": statistics.median(busy), "max": busy[-1], "samples": len(busy)}


def counter_delta(before: dict, after: dict, name: str) -> float | None:
    if before.get(name) is None or after.get(name) is None:
        return None
    return after[name] - before[name]


def server_figures(url: str) -> dict:
    """What the ember server itself says (nothing for the HF baseline)."""
    try:
        info = httpx.get(url + "/server_info", timeout=10)
        metrics = httpx.get(url + "/metrics", timeout=10)
    except httpx.HTTPError:
        return {}
    if info.status_code != 200:
        return {}
    data = info.json()
    samples = parse_metrics(metrics.text)
    return {
        "kv_capacity_tokens": data["max_total_num_tokens"],
        "kv_dtype": data["kv_cache"]["dtype"],
        "weight_bytes": data["weight_bytes"],
        "preemptions": samples.get("ember:num_preemptions_total"),
        "prefill_tokens_computed": samples.get("ember:prefill_tokens_computed_total"),
        "integrity_failures": samples.get("ember:kv_integrity_failures_total"),
        "integrity_cpu_s": samples.get("ember:kv_integrity_cpu_seconds_total"),
    }
