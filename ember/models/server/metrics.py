"""``/metrics``: Prometheus text exposition of the server's counters, gauges and histograms.

Names are SGLang's (``sglang:prompt_tokens_total``, ``sglang:num_running_reqs``,
``sglang:token_usage``, ``sglang:num_used_tokens``, ``sglang:cache_hit_rate``,
``sglang:gen_throughput``, ``sglang:time_to_first_token_seconds``,
``sglang:time_per_output_token_seconds``...),
so the model pool and any SGLang dashboard read an ember model server and an SGLang server the
same way; what SGLang has no name for is ``ember:`` (KV integrity, KV capacity, preemptions).
Every sample carries ``model_name``.

Request-side figures (requests, latencies) are recorded by the event loop; engine-side ones
(running, waiting, pages, prefix-cache hits, integrity) are read from the engine's stats when
scraped.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from dataclasses import dataclass, field

# Seconds; SGLang's TTFT buckets start at 1 ms and grow roughly x2-x2.5.
LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    30.0,
    60.0,
    120.0,
)
ITL_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.0,
)


@dataclass(slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)  # the last one is +Inf

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


@dataclass(slots=True)
class TokenRate:
    """Generated tokens per second over the last ``window`` seconds (SGLang's
    ``sglang:gen_throughput`` is the same figure over its last logging interval). Times are
    ``time.perf_counter()`` values passed in, so the arithmetic is testable without waiting."""

    window: float = 10.0
    events: deque[tuple[float, int]] = field(default_factory=deque)

    def add(self, now: float, tokens: int) -> None:
        self.events.append((now, tokens))
        self._drop_before(now - self.window)

    def rate(self, now: float) -> float:
        self._drop_before(now - self.window)
        if not self.events:
            return 0.0
        # Over the span the tokens came in (a server up for 2 s is not diluted over 10 s),
        # but never less than one second (one burst is not an infinite rate).
        span = max(now - self.events[0][0], 1.0)
        return sum(tokens for _, tokens in self.events) / span

    def _drop_before(self, start: float) -> None:
        while self.events and self.events[0][0] < start:
            self.events.popleft()


@dataclass(slots=True)
class EngineGauges:
    """What the engine reports at scrape time."""

    running: int
    waiting: int
    token_usage: float  # fraction of KV pages in use
    cache_hit_rate: float  # prefix-cache hit tokens / queried tokens
    kv_capacity_tokens: int
    used_tokens: int  # KV slots held by requests (pages in use x page size)
    preemptions: int
    integrity_failures: int  # steps whose KV failed a check (the request recomputed)
    integrity_errors: int  # requests failed after the retries
    integrity_reuse_failures: int  # cached pages dropped by the check before reuse
    integrity_cpu_seconds: float  # CPU time of the KV integrity checker (engine thread)
    prompt_tokens_computed: int  # prefill tokens run through the model
    prefix_cached_tokens: int = 0  # tokens of the pages in the prefix cache (0 after a flush)
    cache_flushes: int = 0  # /flush_cache calls that flushed


class ServerMetrics:
    """The model server's metrics (one per server; updated from the event loop only)."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.requests = 0
        self.aborted = 0
        self.failed = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.ttft = Histogram(LATENCY_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.tpot = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(LATENCY_BUCKETS)
        self.throughput = TokenRate()

    def tokens_generated(self, now: float, tokens: int) -> None:
        """One engine step gave a request ``tokens`` new tokens (``now``: perf_counter)."""
        self.throughput.add(now, tokens)

    def request_finished(
        self,
        prompt: int,
        completion: int,
        cached: int,
        e2e: float,
        outcome: str,
        ttft: float | None = None,
    ) -> None:
        """One request is over: ``outcome`` ``ok``, ``abort`` (client left) or ``error``.
        ``ttft``: when its first token came (its time per output token is the rest of
        ``e2e`` over the other tokens, as SGLang's)."""
        if ttft is not None and completion > 1:
            self.tpot.observe((e2e - ttft) / (completion - 1))
        self.requests += 1
        self.prompt_tokens += prompt
        self.generation_tokens += completion
        self.cached_tokens += cached
        self.e2e.observe(e2e)
        if outcome == "abort":
            self.aborted += 1
        elif outcome == "error":
            self.failed += 1

    def render(self, gauges: EngineGauges | None, now: float | None = None) -> str:
        """The exposition text; ``now`` (perf_counter) ends the throughput window."""
        out = _Writer(self.model_name)
        out.metric("sglang:num_requests_total", "counter", "Requests finished.", self.requests)
        out.metric(
            "sglang:num_aborted_requests_total",
            "counter",
            "Requests aborted because the client went away.",
            self.aborted,
        )
        out.metric(
            "ember:num_failed_requests_total",
            "counter",
            "Requests that ended with a server-side error.",
            self.failed,
        )
        out.metric(
            "sglang:prompt_tokens_total",
            "counter",
            "Prompt tokens of finished requests.",
            self.prompt_tokens,
        )
        out.metric(
            "sglang:generation_tokens_total",
            "counter",
            "Generated tokens of finished requests.",
            self.generation_tokens,
        )
        out.metric(
            "sglang:cached_tokens_total",
            "counter",
            "Prompt tokens served from the prefix cache.",
            self.cached_tokens,
        )
        if gauges is not None:
            _engine_metrics(out, gauges)
        rate = self.throughput.rate(time.perf_counter() if now is None else now)
        out.metric("sglang:gen_throughput", "gauge", "Generated tokens per second.", rate)
        out.histogram(
            "sglang:time_to_first_token_seconds",
            "Time from request arrival to its first token.",
            self.ttft,
        )
        out.histogram(
            "sglang:inter_token_latency_seconds", "Time between consecutive tokens.", self.itl
        )
        out.histogram(
            "sglang:time_per_output_token_seconds",
            "Per request: time after the first token over the tokens after the first.",
            self.tpot,
        )
        out.histogram(
            "sglang:e2e_request_latency_seconds",
            "Time from request arrival to its last token.",
            self.e2e,
        )
        return out.text()


def _engine_metrics(out: _Writer, g: EngineGauges) -> None:
    out.metric("sglang:num_running_reqs", "gauge", "Requests in the running batch.", g.running)
    out.metric("sglang:num_queue_reqs", "gauge", "Requests waiting to be scheduled.", g.waiting)
    out.metric("sglang:token_usage", "gauge", "Fraction of KV cache pages in use.", g.token_usage)
    out.metric("sglang:num_used_tokens", "gauge", "KV cache tokens in use.", g.used_tokens)
    out.metric(
        "sglang:cache_hit_rate", "gauge", "Prefix-cache hit tokens / queried.", g.cache_hit_rate
    )
    out.metric(
        "ember:kv_capacity_tokens", "gauge", "Tokens the KV cache holds.", g.kv_capacity_tokens
    )
    out.metric(
        "ember:prefix_cache_tokens",
        "gauge",
        "Tokens of the KV pages registered in the prefix cache (0 after /flush_cache).",
        g.prefix_cached_tokens,
    )
    out.metric(
        "ember:cache_flushes_total", "counter", "Prefix-cache flushes done.", g.cache_flushes
    )
    out.metric(
        "ember:num_preemptions_total", "counter", "Requests preempted for KV.", g.preemptions
    )
    out.metric(
        "ember:prefill_tokens_computed_total",
        "counter",
        "Prompt tokens run through the model (recomputation included).",
        g.prompt_tokens_computed,
    )
    out.metric(
        "ember:kv_integrity_failures_total",
        "counter",
        "Steps whose KV failed an integrity check (the request was recomputed).",
        g.integrity_failures,
    )
    out.metric(
        "ember:kv_integrity_errors_total",
        "counter",
        "Requests failed with a KV integrity error after their retries.",
        g.integrity_errors,
    )
    out.metric(
        "ember:kv_integrity_reuse_failures_total",
        "counter",
        "Cached KV pages that failed the check before reuse (dropped).",
        g.integrity_reuse_failures,
    )
    out.metric(
        "ember:kv_integrity_cpu_seconds_total",
        "counter",
        "CPU time the KV integrity checker spent (stamping, digesting, checking).",
        g.integrity_cpu_seconds,
    )


class _Writer:
    def __init__(self, model_name: str) -> None:
        escaped = model_name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        self.label = f'model_name="{escaped}"'
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_text: str, value: float) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.lines.append(f"{name}{{{self.label}}} {_number(value)}")

    def histogram(self, name: str, help_text: str, hist: Histogram) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        running = 0
        for bound, count in zip((*hist.buckets, float("inf")), hist.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else _number(bound)
            self.lines.append(f'{name}_bucket{{{self.label},le="{le}"}} {running}')
        self.lines.append(f"{name}_sum{{{self.label}}} {_number(hist.total)}")
        self.lines.append(f"{name}_count{{{self.label}}} {hist.count}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def parse_prometheus(text: str) -> dict[str, float]:
    """``{"name{labels}": value}`` for every sample line (tests and the pool read it so)."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        samples[key] = float(value)
    return samples
