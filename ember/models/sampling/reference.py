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

from ember.models.sampling.params import SamplingParams
from ember.models.sampling.state import SamplingState


@dataclass(frozen=True, slots=True)
class RowSample:
    token: int
    logprob: float | None  # when the request asked for logprobs (raw or processed, as it asked)
    top_logprobs: list[tuple[int, float]]  # (token, logprob), most likely first


def processed_logits_reference(logits: list[float], state: SamplingState) -> list[float]:
    """Tokens outside allowed_token_ids and bad words' last tokens to -inf; logit bias; ending
    tokens to -inf before ``min_tokens``; repetition penalty (prompt and
    generated tokens), then frequency and presence penalties (generated tokens)."""
    params = state.params
    out = list(logits)
    if params.allowed_token_ids is not None:
        allowed = set(params.allowed_token_ids)
        out = [v if t in allowed else -math.inf for t, v in enumerate(out)]
    for word in params.bad_words_token_ids:
        done = state.output_token_ids[len(state.output_token_ids) - len(word) + 1 :]
        if len(word) - 1 <= len(state.output_token_ids) and (
            len(word) == 1 or done == list(word[:-1])
        ):
            out[word[-1]] = -math.inf
    for token, bias in params.logit_bias:
        out[token] += bias
    if state.num_generated < params.min_tokens:
        for token in state.ending_token_ids:
            out[token] = -math.inf
    counts = Counter(state.output_token_ids)
    prompt = set()
    if state.prompt_mask is not None:
        prompt = {int(t) for t in torch.nonzero(state.prompt_mask).flatten().tolist()}
    rep = params.repetition_penalty
    for token in range(len(out)):
        if rep != 1.0 and (token in counts or token in prompt):
            out[token] = out[token] / rep if out[token] > 0 else out[token] * rep
        if token in counts:
            out[token] -= params.frequency_penalty * counts[token] + params.presence_penalty
    return out


def _cut(probs: list[float], params: SamplingParams) -> list[int]:
    """Tokens kept, most likely first: top-k, then top-p over the renormalised top-k mass,
    then min-p relative to the most likely token; the most likely token always stays."""
    vocab = len(probs)
    order = sorted(range(vocab), key=lambda t: (-probs[t], t))
    top_k = order[: params.effective_top_k or vocab]
    total = sum(probs[t] for t in top_k)
    kept: list[int] = []
    ahead = 0.0
    for rank, token in enumerate(top_k):
        too_far = params.top_p < 1.0 and ahead / total >= params.top_p
        too_small = probs[token] < params.min_p * probs[order[0]]
        if rank > 0 and (too_far or too_small):
            break
        kept.append(token)
        ahead += probs[token]
    return kept


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
    values = processed_logits_reference(raw, state)
    vocab = len(values)
    if params.greedy:
        best = max(values)
        token = values.index(best)  # the first of equal maxima, as torch.argmax
    else:
        probs = _softmax([v / params.temperature for v in values])
        kept = _cut(probs, params) if params.has_cut else list(range(vocab))
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
        source = raw
        if params.logprobs_mode != "raw":  # what the row was sampled from (before the cut)
            scale = 1.0 if params.greedy else params.temperature
            source = [v / scale for v in values]
        if params.logprobs_mode == "processed_cut" and not params.greedy and params.has_cut:
            kept = set(_cut(_softmax(source), params))
            source = [v if t in kept else -math.inf for t, v in enumerate(source)]
        log_probs = [math.log(p) if p > 0 else -math.inf for p in _softmax(source)]
        logprob = log_probs[token]
        ranked = sorted(range(vocab), key=lambda t: (-log_probs[t], t))
        top = [(t, log_probs[t]) for t in ranked[: params.top_logprobs]]
    if record:
        state.append(token)
    return RowSample(token, logprob, top)
