"""The batched sampler: one step of next-token choice for B requests with per-row parameters.

``Sampler()(logits (B, V), states)`` -> ``SamplerOutput`` (token ids, and logprobs when asked).
Per row, in this order: tokens outside ``allowed_token_ids`` and the last tokens of
``bad_words`` the output is about to complete set to -inf, ``logit_bias`` added, EOS/stop ids
masked before ``min_tokens``, penalties
(repetition, then frequency/presence); greedy rows take the argmax; the others divide by their
temperature, softmax, optionally cut (top-k, then top-p on the renormalised top-k mass, and
min-p relative to the most likely token), and draw.

The draw is inverse-CDF with **one uniform number per row from the request's own generator**
(``torch.rand(1, dtype=float64, generator=g)``): every row's result depends only on its logits and
its generator, never on batch composition. Token order for the CDF: rows with a cut use
probabilities sorted descending (stable, ties by token id); rows without use plain
vocabulary order (no sort); draw.py does the arithmetic. ``reference.sample_row_reference`` does
the same arithmetic one row at a time in float64 with Python loops; tests compare the two.

Logprobs are of the model's raw distribution (``log_softmax`` of the logits before penalties and
temperature), as vLLM reports them by default; a row whose ``logprobs_mode`` is ``processed`` gets
those of the distribution it is sampled from before any cut: ``log_softmax`` of the logits after
``logit_bias`` and the penalties, divided by its temperature (1 for a greedy row), as SGLang's
sampler reports them; ``processed_cut`` also drops what the row's top-k / top-p / min-p cut
drops (-inf; the kept tokens renormalised), the very distribution drawn from, as vLLM's
``--logprobs-mode processed_logprobs`` reports it (a greedy row: no temperature, no cut).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ember.models.sampling.bans import banned_words
from ember.models.sampling.draw import cut_mask, draw_cut, draw_plain
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


def process_logits(logits: torch.Tensor, states: Sequence[SamplingState]) -> torch.Tensor:
    """``logits`` (B, V) in float32 with, per row: ``logit_bias`` added, ending tokens masked
    before ``min_tokens``, then the repetition, frequency and presence penalties. Never modifies
    ``logits``; returns it (as float32) when no row changes anything."""
    out = logits.float()
    device = out.device
    rows, cols, values = [], [], []
    for i, state in enumerate(states):
        for token in banned_words(state.params.bad_words_token_ids, state.output_token_ids):
            rows.append(i)
            cols.append(token)
            values.append(float("-inf"))
        for token, bias in state.params.logit_bias:
            rows.append(i)
            cols.append(token)
            values.append(bias)
        if state.before_min_tokens:
            for token in state.ending_token_ids:
                rows.append(i)
                cols.append(token)
                values.append(float("-inf"))
    penalised = any(s.output_counts is not None for s in states)
    restricted = [i for i, s in enumerate(states) if s.disallowed is not None]
    if rows or penalised or restricted:
        # Copy only when something changes: .float() of float32 logits is the caller's tensor.
        out = out.clone()
    for i in restricted:
        out[i].masked_fill_(states[i].disallowed.to(device), float("-inf"))  # type: ignore[union-attr]
    if rows:
        index = (torch.tensor(rows, device=device), torch.tensor(cols, device=device))
        out.index_put_(index, torch.tensor(values, device=device), accumulate=True)
    return _apply_penalties(out, states) if penalised else out


def _apply_penalties(out: torch.Tensor, states: Sequence[SamplingState]) -> torch.Tensor:
    rows = [i for i, s in enumerate(states) if s.output_counts is not None]
    if not rows:
        return out
    index = torch.tensor(rows, device=out.device)
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
    """Holds no tensors between calls (the engine owns the ``SamplingState``s).

    ``candidates``: how many of the most likely tokens a cut row examines before falling back to
    sorting its whole vocabulary (draw.py); any value gives the same tokens, only speed differs.
    """

    def __init__(self, candidates: int = 1024) -> None:
        self.candidates = candidates

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
        penalised = process_logits(logits, states)
        tokens = torch.empty(batch, dtype=torch.long, device=logits.device)
        greedy = [i for i, s in enumerate(states) if s.params.greedy]
        if greedy:
            index = torch.tensor(greedy, device=logits.device)
            tokens[index] = penalised[index].argmax(dim=-1)
        sampled = [i for i, s in enumerate(states) if not s.params.greedy]
        if sampled:
            index = torch.tensor(sampled, device=logits.device)
            tokens[index] = self._draw(penalised[index], [states[i] for i in sampled])
        tokens = tokens.cpu()
        output = _with_logprobs(logits, penalised, tokens, states)
        if record:
            for state, token in zip(states, tokens.tolist(), strict=True):
                state.append(token)
        return output

    def _draw(self, logits: torch.Tensor, states: list[SamplingState]) -> torch.Tensor:
        """Sampled rows: temperature, softmax, one uniform per row from its own generator."""
        temperature = _column([s.params.temperature for s in states], logits)
        probs = torch.softmax(logits / temperature, dim=-1)
        uniform = torch.cat(
            [torch.rand(1, dtype=torch.float64, generator=s.generator) for s in states]
        ).to(logits.device)
        tokens = torch.empty(len(states), dtype=torch.long, device=logits.device)
        cut = [i for i, s in enumerate(states) if s.params.has_cut]
        plain = [i for i, s in enumerate(states) if not s.params.has_cut]
        if cut:
            index = torch.tensor(cut, device=logits.device)
            params = [states[i].params for i in cut]
            tokens[index] = draw_cut(
                probs[index], params, uniform[index], candidates=self.candidates
            )
        if plain:
            index = torch.tensor(plain, device=logits.device)
            tokens[index] = draw_plain(probs[index], uniform[index])
        return tokens


def _logprob_source(
    logits: torch.Tensor, penalised: torch.Tensor, states: Sequence[SamplingState]
) -> torch.Tensor:
    """Per row, the logits whose ``log_softmax`` its logprobs report (see the module doc)."""
    processed = [i for i, s in enumerate(states) if s.params.logprobs_mode != "raw"]
    if not processed:
        return logits
    out = logits.float().clone()
    for i in processed:
        params = states[i].params
        if params.greedy:  # no temperature, no cut: the argmax of the processed logits
            out[i] = penalised[i]
            continue
        row = penalised[i] / params.temperature
        if params.logprobs_mode == "processed_cut" and params.has_cut:
            dropped = cut_mask(torch.softmax(row, dim=-1).unsqueeze(0), [params])[0]
            row = row.masked_fill(dropped, float("-inf"))
        out[i] = row
    return out


def _with_logprobs(
    logits: torch.Tensor,
    penalised: torch.Tensor,
    tokens: torch.Tensor,
    states: Sequence[SamplingState],
) -> SamplerOutput:
    wanted = [i for i, s in enumerate(states) if s.params.logprobs]
    if not wanted:
        return SamplerOutput(tokens, None, None, None)
    logits = _logprob_source(logits, penalised, states)
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
