"""``ember serve --metrics-port``: the platform's Prometheus metrics, on a listener of its own.

The tenants' port is no place for them (request rates and error codes are the operator's
business), so they answer only on the metrics listener, as SGLang's router serves its own on
``--prometheus-port``. What is counted:

- ``ember_worker_requests_total{status, outcome}``: workers' requests by status class (``2xx``
  ...) and outcome (``ok``, ``exception``, ``cpu_limit``, ``memory_limit``...), from the
  supervisor's request events;
- ``ember_isolates`` and ``ember_deployments_live``: what runs now;
- ``ember_http_refusals_total{status, reason}``: what the HTTP layer refused before any route
  saw it (``connguard.py``), by the bound: ``head_timeout`` and ``body_timeout`` (408),
  ``head_size`` and ``trailer_size`` (431), ``max_connections_per_address`` (429) and
  ``max_connections`` (503);
- ``ember_ai_requests_total{model, status, code}`` and ``ember_ai_answer_head_seconds{model}``:
  every AI call (binding, REST, ``/ai/v1``), counted by the gateway (``bindings/ai/tally.py``),
  the calls the platform's per-account rate refuses before the gateway included (``ai.py``),
  and those a front refuses for their body or options (``AIGateway.refusal``);
- the pool at scrape time: ``ember_pool_queued_requests{model}``, ``ember_pool_replicas{model,
  state}``, ``ember_pool_replica_requests_in_flight{model, replica}`` and
  ``ember_pool_replica_restarts_total{model, replica}`` (``replica="1"`` is what the log and
  errors call "replica 1"). The replicas' own engine metrics (``sglang:*``) are on each
  replica's ``/metrics``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ember.models.server.metrics import Histogram

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(slots=True)
class WorkerTally:
    """Workers' finished requests, keyed by (status class, outcome)."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)

    def record(self, status: int, outcome: str) -> None:
        self.requests[(f"{status // 100}xx", outcome)] += 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the platform runs at scrape time."""

    workers: WorkerTally
    isolates: int
    deployments: int
    gateway: Any | None  # the AI gateway, None where this build has none
    http_refusals: Counter[tuple[int, str]] = field(default_factory=Counter)


def render(snapshot: Snapshot) -> str:
    out = _Writer()
    out.family("ember_worker_requests_total", "counter", "Workers' finished requests.")
    for (status, outcome), count in sorted(snapshot.workers.requests.items()):
        out.sample("ember_worker_requests_total", {"status": status, "outcome": outcome}, count)
    out.family("ember_isolates", "gauge", "Isolate processes running now.")
    out.sample("ember_isolates", {}, snapshot.isolates)
    out.family("ember_deployments_live", "gauge", "Deployments that answer requests.")
    out.sample("ember_deployments_live", {}, snapshot.deployments)
    name = "ember_http_refusals_total"
    out.family(name, "counter", "Requests and connections the HTTP layer refused, by bound.")
    for (status, reason), count in sorted(snapshot.http_refusals.items()):
        out.sample(name, {"status": str(status), "reason": reason}, count)
    if snapshot.gateway is not None:
        _ai(out, snapshot.gateway)
    return out.text()


def _ai(out: _Writer, gateway: Any) -> None:
    tally = gateway.tally
    out.family("ember_ai_requests_total", "counter", "AI requests by model, status and code.")
    for outcome, count in sorted(tally.requests.items(), key=lambda item: repr(item[0])):
        labels = {"model": outcome.model, "status": str(outcome.status), "code": str(outcome.code)}
        out.sample("ember_ai_requests_total", labels, count)
    name = "ember_ai_answer_head_seconds"
    out.family(name, "histogram", "Time to an AI answer's head (a stream's first bytes).")
    for model, histogram in sorted(tally.head_seconds.items()):
        out.histogram(name, {"model": model}, histogram)
    rows = gateway.pool.status()
    out.family("ember_pool_queued_requests", "gauge", "Requests waiting for a replica.")
    for row in rows:
        out.sample("ember_pool_queued_requests", {"model": row.model_id}, row.queued)
    out.family("ember_pool_replicas", "gauge", "Replicas by state.")
    for row in rows:
        states = Counter(replica.state for replica in row.replicas)
        for state, count in sorted(states.items()):
            out.sample("ember_pool_replicas", {"model": row.model_id, "state": state}, count)
    per_replica: tuple[tuple[str, str, str, Callable[[Any], int]], ...] = (
        ("ember_pool_replica_requests_in_flight", "gauge", "Requests a replica serves now.",
         lambda replica: replica.outstanding),
        ("ember_pool_replica_restarts_total", "counter", "Times a replica was restarted.",
         lambda replica: replica.restarts),
    )  # fmt: skip
    for name, kind, help_text, read in per_replica:
        out.family(name, kind, help_text)
        for row in rows:
            for replica in row.replicas:
                # Numbered from 1, as the log and errors name replicas ("replica 1").
                labels = {"model": row.model_id, "replica": str(replica.number)}
                out.sample(name, labels, read(replica))


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        self.lines.append(f"{name}{_labels(labels)} {_number(value)}")

    def histogram(self, name: str, labels: dict[str, str], histogram: Histogram) -> None:
        running = 0
        bounds = (*histogram.buckets, float("inf"))
        for bound, count in zip(bounds, histogram.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else _number(bound)
            self.sample(f"{name}_bucket", {**labels, "le": le}, running)
        self.sample(f"{name}_sum", labels, histogram.total)
        self.sample(f"{name}_count", labels, histogram.count)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))
