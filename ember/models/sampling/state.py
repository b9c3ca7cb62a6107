"""Per-request sampling state: the request's own random generator and its token counts.

One ``torch.Generator`` per request (seeded from ``seed``, or from the OS when none is given) is
what makes "same seed, same output" hold whatever else shares the batch: a request's draws never
come from a stream other requests consume. Token counts exist only for requests with penalties:
``output_counts`` (V,) int32 counts generated tokens (frequency/presence penalties, as OpenAI
defines them: generated tokens only) and ``prompt_mask`` (V,) bool marks prompt tokens
(repetition penalty, as HF/vLLM define it: prompt and generated tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ember.errors import InvalidModelInput
from ember.models.sampling.params import SamplingParams


@dataclass(slots=True)
class SamplingState:
    """What the sampler needs to remember about one request between steps."""

    params: SamplingParams
    vocab_size: int
    generator: torch.Generator | None = None  # None for greedy requests (nothing is drawn)
    output_counts: torch.Tensor | None = None  # int32 (V,), only with penalties
    prompt_mask: torch.Tensor | None = None  # bool (V,), only with a repetition penalty
    num_generated: int = 0
    output_token_ids: list[int] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        params: SamplingParams,
        vocab_size: int,
        prompt_token_ids: Sequence[int] = (),
        *,
        device: torch.device | str = "cpu",
    ) -> SamplingState:
        """Fresh state for a request; validates ``stop_token_ids`` against the vocabulary."""
        bad = [t for t in params.stop_token_ids if t >= vocab_size]
        if bad:
            raise InvalidModelInput(
                "stop_token_ids",
                f"stop_token_ids must be token ids below the vocabulary size {vocab_size}, "
                f"got {bad[0]}",
            )
        generator = None
        if not params.greedy:
            # Draws happen on the CPU whatever the logits' device: one number per step.
            generator = torch.Generator(device="cpu")
            if params.seed is None:
                generator.seed()
            else:
                generator.manual_seed(params.seed)
        state = cls(params, vocab_size, generator)
        if params.has_penalties:
            state.output_counts = torch.zeros(vocab_size, dtype=torch.int32, device=device)
        if params.repetition_penalty != 1.0:
            mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
            ids = torch.tensor(list(prompt_token_ids), dtype=torch.long, device=device)
            if ids.numel():
                if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
                    raise InvalidModelInput("prompt", "prompt token ids lie outside the vocabulary")
                mask[ids] = True
            state.prompt_mask = mask
        return state

    def append(self, token_id: int) -> None:
        """Record a generated token (the sampler calls this unless told not to)."""
        self.num_generated += 1
        self.output_token_ids.append(token_id)
        if self.output_counts is not None:
            self.output_counts[token_id] += 1
