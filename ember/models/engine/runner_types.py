"""The model runner's seams (``CausalLM``, ``Sampler``) and what a step returns (``StepResult``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from ember.models.attention.backend import AttentionBackend
from ember.models.engine.integrity_types import IntegrityFailure
from ember.models.engine.logprob_types import PromptTokenLogprob
from ember.models.engine.sampling import SampleResult, TokenLogprobs
from ember.models.engine.sequence import Sequence


class CausalLM(Protocol):
    """What the engine needs from an architecture (``ember.models.arch.base.CausalLM``)."""

    def forward(
        self,
        input_ids: torch.Tensor,
        backend: AttentionBackend,
        logits_indices: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``(T,)`` new tokens laid out as ``backend.layout`` -> logits of ``logits_indices``."""
        ...


class Sampler(Protocol):
    def sample(self, logits: torch.Tensor, seqs: list[Sequence]) -> SampleResult:
        """One next token per row of ``logits`` (row ``i`` belongs to ``seqs[i]``).

        Called only for rows whose KV passed this step's integrity checks, so a sampler that
        keeps per-request state (penalties, a seeded generator) never sees a discarded step.
        """
        ...


@dataclass(slots=True)
class StepResult:
    """Next token per scheduled entry (``None``: mid-prefill or failed) and integrity verdicts."""

    tokens: list[int | None]
    failures: list[IntegrityFailure] = field(default_factory=list)
    logprobs: list[TokenLogprobs | None] | None = None  # per scheduled entry, when asked
    # Per scheduled entry, the prompt logprobs its chunk produced (None: none, or dropped
    # with a failed integrity check); None when no entry asked.
    prompt_logprobs: list[list[PromptTokenLogprob] | None] | None = None
    # (scheduled entry, error) for rows the sampler could not sample: those requests end
    # with the error; the rest of the batch is unaffected.
    sample_failures: list[tuple[int, Exception]] = field(default_factory=list)
