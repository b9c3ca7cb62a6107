"""The batched sampler: one step of next-token choice for B requests with per-row parameters.

``Sampler()(logits (B, V), states)`` -> ``SamplerOutput`` (token ids, and logprobs when asked).
Per row, in this order (vLLM's): penalties (repetition, then frequency/presence) on the logits;
greedy rows take the argmax; the others divide by their temperature, softmax, optionally cut to
top-k / top-p, and draw.

The draw is inverse-CDF with **one uniform number per row from the request's own generator**
(``torch.rand(1, dtype=float64, generator=g)``): every row's result depends only on its logits and
its generator, never on batch composition. Token order for the CDF: rows with a top-k or top-p
cut use probabilities sorted descending (stable, ties by token id); rows without use plain
vocabulary order (no sort). ``reference.sample_row_reference`` does the same arithmetic one row at
a time in float64 with Python loops; tests compare the two.

Logprobs are of the model's raw distribution (``log_softmax`` of the logits before penalties and
temperature), as vLLM reports them by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ember.models.sampling.state import SamplingState


@dataclass(frozen=True, slots=True)
class SamplerOutput:
    """One step's choices. Logprob fields are None when no row asked for them."""

    token_ids: torch.Tensor  # (B,) int64, on the CPU
    logprobs: (
        torch.Tensor | None
    )  # (B,) float32: log p(chosen token); NaN for rows that did not ask
    top_logprob_ids: torch.Tensor | None  # (B, K) int64, K = the largest top_logprobs asked
    top_logprobs: torch.Tensor | None  # (B, K) float32, descending; rows asking fewer: use [:k]


def apply_penalties(logits: torch.Tensor, states: Sequence[SamplingState]) -> torch.Tensor:
    """Penalised float32 copy of ``logits`` (B, V); rows without penalties are untouched."""
    out = logits.float().clone()
    rows = [i for i, s in enumerate(states) if s.output_counts is not None]
    if not rows:
        return out
    index = torch.tensor(rows, device=logits.device)
    sub = out[index]
    counts = torch.stack([states[i].output_counts for i in rows]).to(sub.device)  # type: ignore[misc]
    seen = counts > 0
    params = [states[i].params for i in rows]
    rep = _column([p.repetition_penalty for p in params], sub)
    masks = [states[i].prompt_mask for i in rows]
    if any(m is not None for m in masks):
        prompt = torch.stack([m if m is not None else torch.zeros_like(seen[0]) for m in masks])
        hit = seen | prompt.to(sub.device)
        penalised = torch.where(sub > 0, sub / rep, sub * rep)
        sub = torch.where(hit, penalised, sub)
    freq = _column([p.frequency_penalty for p in params], sub)
    pres = _column([p.presence_penalty for p in params], sub)
    sub = sub - freq * counts.to(sub.dtype) - pres * seen.to(sub.dtype)
    out[index] = sub
    return out


def _column(values: list[float], like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(values, dtype=like.dtype, device=like.device).unsqueeze(1)


class Sampler:
    """Stateless; holds no tensors between calls (the engine owns the ``SamplingState``s)."""

    def __call__(
        self, logits: torch.Tensor, states: Sequence[SamplingState], *, record: bool = True
    ) -> SamplerOutput:
        """One token per row of ``logits`` (B, V); with ``record``, appended to each state."""
        if logits.dim() != 2 or logits.shape[0] != len(states):
            raise ValueError(
                f"logits must be (batch, vocab) with one row per state; got "
                f"{tuple(logits.shape)} for {len(states)} states"
            )
        batch = logits.shape[0]
        penalised = apply_penalties(logits, states)
        tokens = torch.empty(batch, dtype=torch.long, device=logits.device)
        greedy = [i for i, s in enumerate(states) if s.params.greedy]
        if greedy:
            index = torch.tensor(greedy, device=logits.device)
            tokens[index] = penalised[index].argmax(dim=-1)
        sampled = [i for i, s in enumerate(states) if not s.params.greedy]
        cut = [i for i in sampled if _has_cut(states[i])]
        plain = [i for i in sampled if not _has_cut(states[i])]
        for rows, sort in ((cut, True), (plain, False)):
            if rows:
                index = torch.tensor(rows, device=logits.device)
                chosen = _draw(penalised[index], [states[i] for i in rows], sort=sort)
                tokens[index] = chosen
        tokens = tokens.cpu()
        output = _with_logprobs(logits, tokens, states)
        if record:
            for state, token in zip(states, tokens.tolist(), strict=True):
                state.append(token)
        return output


def _has_cut(state: SamplingState) -> bool:
    return state.params.effective_top_k > 0 or state.params.top_p < 1.0


def _draw(logits: torch.Tensor, states: list[SamplingState], *, sort: bool) -> torch.Tensor:
    """Inverse-CDF draw for rows (S, V) of penalised logits; returns (S,) token ids."""
    vocab = logits.shape[1]
    temperature = _column([s.params.temperature for s in states], logits)
    # Sums run in float64: a float32 running sum over a 150k vocabulary drifts by ~1e-3.
    probs = torch.softmax(logits / temperature, dim=-1).double()
    if sort:
        probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        rank = torch.arange(vocab, device=logits.device).unsqueeze(0)
        top_k = torch.tensor(
            [s.params.effective_top_k or vocab for s in states], device=logits.device
        ).unsqueeze(1)
        top_p = _column([s.params.top_p for s in states], probs)
        before = torch.cumsum(probs, dim=-1) - probs  # mass strictly ahead of each token
        drop = (rank >= top_k) | ((before >= top_p) & (top_p < 1.0))
        drop[:, 0] = False  # the most likely token always stays
        probs = probs.masked_fill(drop, 0.0)
        kept = vocab - drop.sum(dim=-1, keepdim=True)
    else:
        order = None
        kept = torch.full((len(states), 1), vocab, device=logits.device)
    cdf = torch.cumsum(probs, dim=-1)
    uniform = torch.cat([torch.rand(1, dtype=torch.float64, generator=s.generator) for s in states])
    target = uniform.to(cdf.device).unsqueeze(1) * cdf[:, -1:]
    position = torch.searchsorted(cdf, target, right=True)
    position = torch.minimum(position, kept - 1)  # u * total rounding up to total
    if order is None:
        return position.squeeze(1)
    return order.gather(1, position).squeeze(1)


def _with_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, states: Sequence[SamplingState]
) -> SamplerOutput:
    wanted = [i for i, s in enumerate(states) if s.params.logprobs]
    if not wanted:
        return SamplerOutput(tokens, None, None, None)
    index = torch.tensor(wanted, device=logits.device)
    raw = torch.log_softmax(logits[index].float(), dim=-1).cpu()
    batch = len(states)
    chosen = torch.full((batch,), float("nan"))
    chosen[index.cpu()] = raw.gather(1, tokens[index.cpu()].unsqueeze(1)).squeeze(1)
    k = max(states[i].params.top_logprobs for i in wanted)
    if k == 0:
        return SamplerOutput(tokens, chosen, None, None)
    k = min(k, raw.shape[1])
    values, ids = torch.topk(raw, k, dim=-1)
    top_values = torch.full((batch, k), float("nan"))
    top_ids = torch.full((batch, k), -1, dtype=torch.long)
    top_values[index.cpu()] = values
    top_ids[index.cpu()] = ids
    return SamplerOutput(tokens, chosen, top_ids, top_values)
