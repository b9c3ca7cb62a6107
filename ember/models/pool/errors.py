"""Pool failures, each carrying the Workers AI error code the binding and the REST API send.

The platform documents no code for "the backend crashed" or "the model could not load"; ember
sends a crash or a loss while serving as ``3040`` (out of capacity) with HTTP 503 and a
description saying what happened, because 3040 is the code clients already treat as retryable
(workers-ai-provider maps it to 429 and retries), and a retry may well succeed. A model whose
replicas cannot start at all (a bad ``args`` entry, a missing backend) is different: retrying
cannot help until its configuration changes, so it is ``3043`` "Internal server error" with
HTTP 500, the code Workers AI answers for its own internal failures (observed in platform
answers; the docs' error table has no row for it), naming the config key and the replica's own
error line. Capacity (queue full, ``rejectIfBusy``) is 3040/429 with the platform's own texts,
a per-deployment quota or an account's share of a model 3036/429 ("Account limited": the
account's own limit, not the platform's capacity), a timeout 3007/408 and a cancelled request
3008/408.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.errors import BackendError, LimitExceeded
from ember.models.api.errors import (
    ABORTED,
    CAPACITY_TEMPORARILY_EXCEEDED,
    OUT_OF_CAPACITY,
    TIMEOUT,
    WorkersAIErrorCode,
)

if TYPE_CHECKING:  # fair.py needs nothing from here; the type only, at check time
    from ember.models.pool.fair import AccountCap

REPLICA_FAILED = WorkersAIErrorCode(
    3040, 503, "Out of capacity", "Model {model} failed: {detail}; please try again.", True
)
MODEL_UNAVAILABLE = WorkersAIErrorCode(
    3040, 503, "Out of capacity", "Model {model} is unavailable: {detail}", True
)
MODEL_START_FAILED = WorkersAIErrorCode(
    3043, 500, "Internal server error", "Model {model} cannot start: {detail}"
)
QUOTA_EXCEEDED = WorkersAIErrorCode(3036, 429, "Account limited", "{detail}", True)
# The Retry-After of a refusal for capacity: a slot frees when any running request ends, which
# on a busy replica is a matter of seconds; the openai client and workers-ai-provider read it
# instead of guessing their own backoff.
CAPACITY_RETRY_AFTER_S = 1.0


class InvalidEvent(BackendError):
    """A replica's stream event framed like a JSON object that does not parse, found by the
    translator that read it (the framing check in ``upstream.py`` does not parse events)."""

    def __init__(self, data: str) -> None:
        self.data = data
        super().__init__("a stream event is not valid JSON")


class UpstreamFailed(BackendError):
    """A replica failed, could not start, or did not answer in time."""

    def __init__(self, code: WorkersAIErrorCode, **fields: object) -> None:
        self.code = code
        self.fields = fields
        super().__init__(code.message(**fields))

    @property
    def description(self) -> str:
        """The text after ``"<code>: "``."""
        return self.code.describe(**self.fields)


class CapacityExceeded(LimitExceeded):
    """No room: the model's queue is full, ``rejectIfBusy`` found no free slot, or a quota."""

    def __init__(
        self,
        code: WorkersAIErrorCode,
        *,
        limit: str,
        observed: object,
        maximum: object,
        retry_after: float | None = None,
        **fields: object,
    ) -> None:
        self.code = code
        self.fields = fields
        self.retry_after = retry_after
        super().__init__(limit, observed, maximum, code.message(**fields))

    @property
    def description(self) -> str:
        """The text after ``"<code>: "``."""
        return self.code.describe(**self.fields)


def replica_failed(model: str, detail: str) -> UpstreamFailed:
    """A replica died or broke the protocol while serving a request."""
    return UpstreamFailed(REPLICA_FAILED, model=model, detail=detail)


def model_unavailable(model: str, detail: str) -> UpstreamFailed:
    """No replica of ``model`` can serve (all failed to start, or the pool is closing)."""
    return UpstreamFailed(MODEL_UNAVAILABLE, model=model, detail=detail)


def model_start_failed(model: str, detail: str) -> UpstreamFailed:
    """Every replica of ``model`` failed to start, again and again: its configuration is wrong."""
    return UpstreamFailed(MODEL_START_FAILED, model=model, detail=detail)


def timed_out() -> UpstreamFailed:
    """The request did not finish (or start) within its deadline."""
    return UpstreamFailed(TIMEOUT)


def aborted() -> UpstreamFailed:
    """The request was cancelled before it finished."""
    return UpstreamFailed(ABORTED)


def queue_full(model: str, queued: int, maximum: int) -> CapacityExceeded:
    """The platform's 3040 text: every replica is busy and the queue holds ``maximum``."""
    return CapacityExceeded(
        OUT_OF_CAPACITY,
        limit=f"queued requests for {model}",
        observed=queued,
        maximum=maximum,
        retry_after=CAPACITY_RETRY_AFTER_S,
    )


def busy(model: str) -> CapacityExceeded:
    """``rejectIfBusy``: no free slot right now."""
    return CapacityExceeded(
        CAPACITY_TEMPORARILY_EXCEEDED,
        limit=f"free slots for {model}",
        observed=0,
        maximum=0,
        retry_after=CAPACITY_RETRY_AFTER_S,
    )


def quota_exceeded(
    limit: str, observed: object, maximum: object, detail: str, retry_after: float | None
) -> CapacityExceeded:
    """A per-deployment AI quota (requests per minute, concurrent requests)."""
    return CapacityExceeded(
        QUOTA_EXCEEDED,
        limit=limit,
        observed=observed,
        maximum=maximum,
        retry_after=retry_after,
        detail=detail,
    )


def account_limited(
    model: str, account: str, running: int, queued: int, cap: AccountCap
) -> CapacityExceeded:
    """An account already holds its share of ``model``'s slots and queue (fair.py)."""
    held = running + queued
    if cap.waiting is None:
        bound = f"running or queued; at most {cap.maximum} per account"
    else:
        bound = (
            f"{running} running, {queued} waiting; at most {cap.maximum} per account, "
            f"{cap.waiting} of them waiting"
        )
    return quota_exceeded(
        f"AI requests in flight per account for {model}",
        held + 1,
        cap.maximum,
        f"Account limited: {account} already has {held} AI requests in flight for {model} "
        f"({bound}: {cap.why}); retry when one finishes.",
        CAPACITY_RETRY_AFTER_S,
    )
