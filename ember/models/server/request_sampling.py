"""Constrained decoding behind the engine's ``Sampler`` seam.

The engine samples every request with its own ``SamplingParams`` (``engine.sampling
.RequestSampler``: temperature, top-k/top-p/min-p, penalties, ``logit_bias``, ``min_tokens``,
seeds, logprobs). What it does not know is the grammar of a constrained request (JSON mode, JSON
schema, required tool calls): ``ServerSampler`` masks those rows' logits with the grammar's
allowed tokens, then hands the batch to the engine's sampler.

The HTTP side registers a request's grammar by request id before submitting it and releases it
when the request ends. The grammar comes built (``grammar_builds``: compiled off the engine
thread, its first mask computed), so the engine never compiles one; from registration on it is
touched on the engine thread only (``Grammar`` is not thread-safe). The matcher lives on the
engine thread and, before each step, catches up with the completion tokens the engine kept, so
a step the engine discards never desynchronises it. With no constrained request in the batch,
sampling is exactly the engine's own (its greedy fast path included).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ember.models.constrain.grammar import Grammar
from ember.models.constrain.session import (
    ConstrainedDecoder,
    ConstraintSpec,
    ConstraintViolation,
    GrammarCache,
)
from ember.models.constrain.torch_masks import apply_token_masks
from ember.models.constrain.vocab import TokenVocabulary
from ember.models.engine.sampling import RequestSampler, SampleResult

log = logging.getLogger(__name__)


class _Sequence:
    """What the sampler reads of an engine ``Sequence`` (besides what ``RequestSampler`` reads)."""

    request_id: str
    token_ids: list[int]
    num_prompt_tokens: int


@dataclass(frozen=True, eq=False, slots=True)
class _Registration:
    """One request's grammar, registered by the event loop (a new object per registration, so
    that a reused request id is told apart by identity)."""

    grammar: Grammar


@dataclass(slots=True)
class _Matcher:
    registration: _Registration  # the one it was made for (an id may be reused)
    decoder: ConstrainedDecoder
    consumed: int = 0  # completion tokens fed to the decoder so far


class ServerSampler:
    """The engine's sampler for the model server (see the module docstring)."""

    def __init__(self, vocab: TokenVocabulary | None = None) -> None:
        self.vocab = vocab
        self._inner = RequestSampler()
        self._specs: dict[str, _Registration] = {}  # written by the event loop
        self._matchers: dict[str, _Matcher] = {}  # engine thread only

    def constrain(self, request_id: str, grammar: Grammar) -> None:
        """Register a request's built grammar before the request is submitted; from here on
        only the engine thread touches it."""
        if self.vocab is None:
            raise ValueError("constrained decoding needs the tokenizer's vocabulary")
        self._specs[request_id] = _Registration(grammar)

    def release(self, request_id: str) -> None:
        """The request is over; its matcher is dropped at the engine's next step."""
        self._specs.pop(request_id, None)

    def sample(self, logits: torch.Tensor, seqs: list) -> SampleResult:  # noqa: ANN001
        if not self._specs and not self._matchers:
            return self._inner.sample(logits, seqs)
        masks = []
        failed: dict[int, Exception] = {}
        for row, seq in enumerate(seqs):
            try:
                masks.append(self._mask(seq))
            except ConstraintViolation as exc:
                # This request's grammar cannot go on (a bug in it, or a dead end): the engine
                # ends this request with the error; the others in the batch are unaffected.
                failed[row] = ConstraintViolation(f"request {seq.request_id!r}: {exc}")
                masks.append(None)
                self._specs.pop(seq.request_id, None)
            except Exception as exc:  # noqa: BLE001 - any other fault stays this row's too
                # Advancing one request's grammar or computing its mask failed in a way no
                # constraint names (a bug, a schema deep enough to exhaust the stack): ember's
                # fault, but only this request's; failing the step would end every request.
                log.exception("constrained decoding failed for request %r", seq.request_id)
                failed[row] = ConstraintViolation(
                    f"request {seq.request_id!r}: internal error in its output constraint "
                    f"({type(exc).__name__}: {exc})"
                )
                masks.append(None)
                self._specs.pop(seq.request_id, None)
        for request_id in [r for r in self._matchers if r not in self._specs]:
            del self._matchers[request_id]
        if any(mask is not None for mask in masks):
            logits = logits.float().clone()
            apply_token_masks(logits, masks)
        result = self._inner.sample(logits, seqs)
        if failed:
            result = dataclasses.replace(result, failed={**result.failed, **failed})
        return result

    def _mask(self, seq: _Sequence):  # noqa: ANN202 - constrain.masks.TokenMask | None
        registration = self._specs.get(seq.request_id)
        if registration is None:
            return None
        matcher = self._matchers.get(seq.request_id)
        # A released request's matcher lives until the next step: a new request reusing its
        # id before then must not inherit its grammar and progress.
        if matcher is None or matcher.registration is not registration:
            assert self.vocab is not None
            decoder = ConstrainedDecoder(registration.grammar, self.vocab)
            matcher = _Matcher(registration, decoder)
            self._matchers[seq.request_id] = matcher
        completion = seq.token_ids[seq.num_prompt_tokens :]
        for token in completion[matcher.consumed :]:
            matcher.decoder.advance(token)
        matcher.consumed = len(completion)
        mask = matcher.decoder.allowed_token_mask()
        if mask.count():
            return mask
        if matcher.decoder.eos_seen:
            return None  # EOS taken, the request ends this step: leave the row be
        raise ConstraintViolation(
            "the grammar allows no token after the output so far (a dead end in the constraint)"
        )


def reference_masks(
    vocab: TokenVocabulary, spec: ConstraintSpec, completions: Sequence[list[int]]
) -> list[set[int]]:
    """The allowed next tokens after each completion prefix, from a fresh matcher each time
    (the slow definition the incremental matcher is tested against)."""
    out = []
    for completion in completions:
        decoder = GrammarCache().decoder(spec, vocab)
        for token in completion:
            decoder.advance(token)
        out.append(set(decoder.allowed_token_mask().token_ids()))
    return out
