"""What the engine hands out: per-request outputs, prepared requests, stats, flush results.

Kept apart from ``llm_engine.py`` (the loop) because the async front (``async_engine.py``), the
model server and tests use these types without needing the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.models.engine.logprob_types import PromptLogprobSpec, PromptTokenLogprob
from ember.models.engine.sampling import TokenLogprobs
from ember.models.engine.sequence import StopCriteria
from ember.models.sampling import SamplingState


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # prompt tokens served from the prefix cache


@dataclass(frozen=True, slots=True)
class RequestOutput:
    """What one step did for one request: its new tokens, and whether it is over."""

    request_id: str
    new_token_ids: tuple[int, ...]
    finished: bool
    finish_reason: str | None  # "stop" | "length" | "abort" | "error"
    usage: Usage
    error: Exception | None = None
    logprobs: tuple[TokenLogprobs, ...] = ()  # one per new token, when the request asked
    # The prompt's logprobs (from the spec's start token on), on the request's first output
    # only, when it asked; None otherwise.
    prompt_logprobs: tuple[PromptTokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A validated request, ready for ``add_prepared`` (see ``prepare_request``)."""

    prompt_token_ids: list[int]
    stop: StopCriteria
    state: SamplingState | None
    prompt_logprobs: PromptLogprobSpec | None = None
    cache_salt: str | None = None  # shares prefix-cache pages only with the same salt


@dataclass(slots=True)
class EngineStats:
    steps: int = 0
    prompt_tokens_computed: int = 0  # prefill tokens run through the model (recompute included)
    generation_tokens: int = 0
    preemptions: int = 0
    integrity_failures: int = 0  # steps whose KV failed a check (the request recomputed)
    integrity_errors: int = 0  # requests failed with KVIntegrityError after the retries
    integrity_reuse_failures: int = 0  # cached pages dropped by the check before reuse
    integrity_cpu_seconds: float = 0.0  # the checker's CPU time (engine thread)
    running: int = 0
    waiting: int = 0
    waiting_tokens: int = 0  # the waiting sequences' tokens, not yet in the KV cache
    pages_used: int = 0
    pages_total: int = 0
    prefix_query_tokens: int = 0
    prefix_hit_tokens: int = 0
    prefix_cached_tokens: int = 0  # tokens of the pages registered in the prefix cache
    cache_flushes: int = 0


@dataclass(frozen=True, slots=True)
class FlushResult:
    """What ``LLMEngine.flush_cache`` did: ``flushed`` is False while requests are in."""

    flushed: bool
    message: str
    dropped_pages: int = 0
