"""Inverse-CDF draws over (S, V) probabilities, one given uniform number per row.

``draw_plain``: vocabulary order, no cut. ``draw_cut``: probabilities in descending order (ties by
token id), cut by top-k, then top-p over the top-k-renormalised mass, then min-p; the most likely
token always stays. Both sum in float64: a float32 running sum over a 150k vocabulary drifts by
~1e-3 of the mass.

A full sort of a 150k vocabulary per row is the slow part of sampling on CPU, so ``draw_cut``
first works on the ``candidates`` most likely tokens (``torch.topk``, then re-sorted so ties are
ordered by token id). That is exact whenever every kept token is strictly more likely than the
least likely candidate (then the kept tokens, and everything ahead of them, are the same as in
a full sort); other rows are redone with a full sort.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ember.models.sampling.params import SamplingParams


def draw_plain(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Token ids (S,) from float probabilities (S, V) and uniforms (S,) in [0, 1)."""
    cdf = torch.cumsum(probs.double(), dim=-1)
    return _invert(cdf, uniform, probs.shape[1] * torch.ones_like(uniform, dtype=torch.long))


def draw_cut(
    probs: torch.Tensor,
    params: Sequence[SamplingParams],
    uniform: torch.Tensor,
    *,
    candidates: int = 1024,
) -> torch.Tensor:
    """Token ids (S,) after the top-k / top-p / min-p cuts of each row's ``params``."""
    rows, vocab = probs.shape
    widest_k = max(p.effective_top_k for p in params)
    width = min(vocab, max(candidates, widest_k))
    if width < vocab:
        values, ids = torch.topk(probs, width, dim=-1)
        ids, by_id = ids.sort(dim=-1)  # canonical order among equal values: by token id
        values = values.gather(1, by_id)
    else:
        values, ids = probs, torch.arange(vocab, device=probs.device).expand(rows, vocab)
    values, order = values.sort(dim=-1, descending=True, stable=True)
    ids = ids.gather(1, order)
    p = values.double()
    total = probs.double().sum(dim=-1, keepdim=True)  # the whole row's mass (top_k = 0 rows)
    kept, cut = _cut(p, params, total)
    cdf = torch.cumsum(cut, dim=-1)
    tokens = ids.gather(1, _invert(cdf, uniform, kept).unsqueeze(1)).squeeze(1)
    if width < vocab:
        last_kept = p.gather(1, (kept - 1).unsqueeze(1)).squeeze(1)
        redo = (last_kept <= p[:, -1]).nonzero().flatten()
        if redo.numel():  # a kept token ties the candidates' edge: sort the whole row
            again = draw_cut(
                probs[redo], [params[i] for i in redo.tolist()], uniform[redo], candidates=vocab
            )
            tokens[redo] = again
    return tokens


def cut_mask(probs: torch.Tensor, params: Sequence[SamplingParams]) -> torch.Tensor:
    """(S, V) bool: the tokens each row's top-k / top-p / min-p cut drops, by a full sort in
    ``draw_cut``'s order (descending, ties by token id)."""
    values, order = probs.sort(dim=-1, descending=True, stable=True)
    kept, _ = _cut(values.double(), params, probs.double().sum(dim=-1, keepdim=True))
    rank = torch.arange(probs.shape[1], device=probs.device).unsqueeze(0)
    dropped = rank >= kept.unsqueeze(1)
    return torch.zeros_like(dropped).scatter(1, order, dropped)


def _cut(
    p: torch.Tensor, params: Sequence[SamplingParams], total: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept counts (S,), probabilities with the dropped ones zeroed) for sorted float64 ``p``."""
    rows, width = p.shape
    device = p.device
    rank = torch.arange(width, device=device).unsqueeze(0)
    # A top_k past the candidates cuts nothing (``width`` is the whole vocabulary then); as
    # sent it may not even fit an int64 (1e308 is "an integer"), and this runs on the engine
    # thread, where an overflow failed the whole loop.
    top_k = torch.tensor([min(q.effective_top_k, width) for q in params], device=device)
    top_k = top_k.unsqueeze(1)
    top_p = torch.tensor([q.top_p for q in params], dtype=p.dtype, device=device).unsqueeze(1)
    min_p = torch.tensor([q.min_p for q in params], dtype=p.dtype, device=device).unsqueeze(1)
    outside_k = (rank >= top_k) & (top_k > 0)
    # top-p looks at the distribution renormalised after the top-k cut (as HF and vLLM do).
    within_k = p.masked_fill(outside_k, 0.0)
    mass = torch.where(top_k > 0, within_k.sum(dim=-1, keepdim=True), total)
    within_k = within_k / mass
    ahead = torch.cumsum(within_k, dim=-1) - within_k  # mass strictly ahead of each token
    drop = outside_k | ((ahead >= top_p) & (top_p < 1.0)) | (p < min_p * p[:, :1])
    drop[:, 0] = False  # the most likely token always stays
    # Every cut drops a suffix of the sorted order, so the kept tokens are a prefix.
    kept = width - drop.sum(dim=-1)
    return kept, p.masked_fill(drop, 0.0)


def _invert(cdf: torch.Tensor, uniform: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """The first position whose cumulative mass exceeds ``u * total``, within the kept prefix."""
    target = uniform.to(cdf.device, cdf.dtype).unsqueeze(1) * cdf[:, -1:]
    position = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return torch.minimum(position, kept.to(position.device) - 1)  # u * total rounding up
