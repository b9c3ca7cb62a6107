"""What a request asks of its prompt's logprobs, and what it gets back (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass

# JSON has no -inf: vLLM clamps every logprob it answers with to this (its chat and completions
# servers), so a token a grammar or logit_bias ruled out reads as "impossible" in valid JSON.
MIN_LOGPROB = -9999.0


def clamp_logprob(value: float) -> float:
    """``value`` as the wire carries it (NaN, which no softmax should give, clamps too)."""
    return value if value >= MIN_LOGPROB else MIN_LOGPROB


@dataclass(frozen=True, slots=True)
class PromptLogprobSpec:
    """Logprobs of prompt tokens ``start`` (>= 1: the first token has no context) to the last,
    each with its ``top`` most likely alternatives."""

    start: int = 1
    top: int = 0

    def __post_init__(self) -> None:
        if self.start < 1:
            raise ValueError(f"start is {self.start}; the first prompt token has no logprob")
        if self.top < 0:
            raise ValueError(f"top is {self.top}; expected >= 0")


@dataclass(frozen=True, slots=True)
class PromptTokenLogprob:
    """One prompt token's log-probability given the tokens before it."""

    token_id: int
    logprob: float
    rank: int  # 1: the most likely token at its position (vLLM's rank)
    top: tuple[tuple[int, float], ...] = ()  # (token id, logprob), most likely first
