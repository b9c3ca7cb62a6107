"""Per-request sampling state: the request's own random generator and its token counts.

One ``torch.Generator`` per request (seeded from ``seed``, or from the OS when none is given) is
what makes "same seed, same output" hold whatever else shares the batch: a request's draws never
come from a stream other requests consume. ``ending_token_ids`` (stop ids and EOS) are masked
while fewer than ``min_tokens`` tokens exist; ``disallowed`` masks what ``allowed_token_ids`` leaves
out. Token counts exist only for requests with penalties:
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
    # Tokens that may not be sampled before ``params.min_tokens``: stop ids and (unless
    # ignore_eos) the EOS ids.
    ending_token_ids: tuple[int, ...] = ()
    # allowed_token_ids as a mask: True for each token that may not be sampled.
    disallowed: torch.Tensor | None = None

    @property
    def before_min_tokens(self) -> bool:
        return self.num_generated < self.params.min_tokens

    @classmethod
    def create(
        cls,
        params: SamplingParams,
        vocab_size: int,
        prompt_token_ids: Sequence[int] = (),
        *,
        eos_token_ids: Sequence[int] = (),
        device: torch.device | str = "cpu",
    ) -> SamplingState:
        """Fresh state for a request; validates token ids against the vocabulary."""
        for name, ids in (
            ("stop_token_ids", params.stop_token_ids),
            ("logit_bias", [t for t, _ in params.logit_bias]),
            ("allowed_token_ids", params.allowed_token_ids or ()),
            ("bad_words", [t for word in params.bad_words_token_ids for t in word]),
        ):
            bad = [t for t in ids if t >= vocab_size]
            if bad:
                raise InvalidModelInput(
                    name,
                    f"{name} must name token ids below the vocabulary size {vocab_size}, "
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
        ending = set(params.stop_token_ids)
        if not params.ignore_eos:
            ending |= {t for t in eos_token_ids if 0 <= t < vocab_size}
        state = cls(params, vocab_size, generator, ending_token_ids=tuple(sorted(ending)))
        if params.allowed_token_ids is not None:
            state.disallowed = torch.ones(vocab_size, dtype=torch.bool, device=device)
            state.disallowed[list(params.allowed_token_ids)] = False
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
