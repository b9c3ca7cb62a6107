"""What the AI gateway counts for the operator's metrics: requests by model, HTTP status and
Workers AI code, and how long each took to its answer's head.

Counted once per ``AIGateway.run`` (the binding, REST ``ai/run`` and ``/ai/v1`` alike). A model
id nobody serves is counted as ``(unknown)``: ids come from tenants, and a label per typo would
let any tenant grow the operator's metrics without bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ember.models.server.metrics import LATENCY_BUCKETS, Histogram

UNKNOWN_MODEL = "(unknown)"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request's labels: ``code`` is the Workers AI code of a failure, 0 for an answer."""

    model: str
    status: int
    code: int = 0


@dataclass(slots=True)
class AITally:
    requests: Counter[Outcome] = field(default_factory=Counter)
    head_seconds: dict[str, Histogram] = field(default_factory=dict)

    def record(self, outcome: Outcome, seconds: float) -> None:
        self.requests[outcome] += 1
        if outcome.code:
            return  # a refusal's time says nothing about how fast answers come
        histogram = self.head_seconds.get(outcome.model)
        if histogram is None:
            histogram = self.head_seconds[outcome.model] = Histogram(LATENCY_BUCKETS)
        histogram.observe(seconds)
