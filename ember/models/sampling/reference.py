"""The slow reference sampler: one row at a time, Python floats (float64), explicit loops.

Same definition as ``sampler.Sampler`` (see its docstring), written for reading rather than speed,
so tests can check the vectorised sampler token for token. It consumes the request's generator
exactly as the batched sampler does (one float64 per non-greedy step).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import torch

from ember.models.sampling.state import SamplingState


@dataclass(frozen=True, slots=True)
class RowSample:
    token: int
    logprob: float | None  # of the raw distribution, when the request asked for logprobs
    top_logprobs: list[tuple[int, float]]  # (token, logprob), most likely first


def penalised_logits_reference(logits: list[float], state: SamplingState) -> list[float]:
    """Repetition penalty (prompt + generated tokens), then frequency and presence penalties."""
    params = state.params
    counts = Counter(state.output_token_ids)
    prompt = set()
    if state.prompt_mask is not None:
        prompt = {int(t) for t in torch.nonzero(state.prompt_mask).flatten().tolist()}
    out = list(logits)
    for token in range(len(out)):
        if params.repetition_penalty != 1.0 and (token in counts or token in prompt):
            value = out[token]
            out[token] = (
                value / params.repetition_penalty
                if value > 0
                else value * params.repetition_penalty
            )
        if token in counts:
            out[token] -= params.frequency_penalty * counts[token] + params.presence_penalty
    return out


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def sample_row_reference(
    logits: torch.Tensor, state: SamplingState, *, record: bool = True
) -> RowSample:
    """Choose the next token for one request from its logits row (V,)."""
    params = state.params
    raw = [float(v) for v in logits.float().tolist()]
    values = penalised_logits_reference(raw, state)
    vocab = len(values)
    if params.greedy:
        best = max(values)
        token = values.index(best)  # the first of equal maxima, as torch.argmax
    else:
        probs = _softmax([v / params.temperature for v in values])
        cut = params.effective_top_k > 0 or params.top_p < 1.0
        order = sorted(range(vocab), key=lambda t: (-probs[t], t)) if cut else list(range(vocab))
        limit = params.effective_top_k or vocab
        kept: list[int] = []
        ahead = 0.0
        for rank, candidate in enumerate(order):
            if (
                cut
                and rank > 0
                and (rank >= limit or (params.top_p < 1.0 and ahead >= params.top_p))
            ):
                break
            kept.append(candidate)
            ahead += probs[candidate]
        assert state.generator is not None
        uniform = float(torch.rand(1, dtype=torch.float64, generator=state.generator))
        target = uniform * sum(probs[t] for t in kept)
        token = kept[-1]
        running = 0.0
        for candidate in kept:
            running += probs[candidate]
            if running > target:
                token = candidate
                break
    logprob, top = None, []
    if params.logprobs:
        log_probs = [math.log(p) if p > 0 else -math.inf for p in _softmax(raw)]
        logprob = log_probs[token]
        ranked = sorted(range(vocab), key=lambda t: (-log_probs[t], t))
        top = [(t, log_probs[t]) for t in ranked[: params.top_logprobs]]
    if record:
        state.append(token)
    return RowSample(token, logprob, top)
