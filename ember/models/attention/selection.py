"""The DSA indexer's arithmetic and its top-k rule, shared by every path that selects.

The same sequence must select the same positions alone, in any batch, in one prefill or in
chunks: a selection is discrete, so one flipped position moves a logprob by ~0.05 where rounding
moves it by ~1e-6. Two things decide it:

1. **Ties.** ``index_score(t, j)`` sums ``relu`` terms, so exact ties are common (two positions
   whose every head's dot is negative both score exactly 0). ``torch.topk`` breaks ties by an
   order that changes with the padded length of the row (the batch's longest context), so the
   rule here is explicit: the highest score first, then the earliest position.
   ``top_positions`` is the fast form (``topk``, and for rows tied at the cut one ``topk`` on
   an int64 key holding both), ``top_positions_reference`` the plain one (a stable descending
   sort), its reference.
2. **Rounding.** ``index_scores`` is the one formula the reference, the dense backend and the
   paged backend all run, per query row in the same op order whatever the row's padding or its
   batch neighbours (one matmul over ``Di``, then the heads summed in order), so a near-tie
   cannot fall one way alone and the other way batched.

transformers' ``GlmMoeDsaIndexer`` calls ``topk`` on the scores and leaves ties to it: where there
is no exact tie at the cut both select the same set; at a tie transformers' own choice depends
on its padded length, so either set is a valid reading of it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_KEY_BLOCK = 16
_LOW_BITS = 0x7FFFFFFF
_POSITION_BITS = 32


def index_scores(
    q: torch.Tensor, k: torch.Tensor, weights: torch.Tensor, scale: float
) -> torch.Tensor:
    """``q`` (..., Q, Hi, Di), ``k`` (..., L, Di), ``weights`` (..., Q, Hi) -> scores (..., Q, L)
    in float32: ``sum_h w[t, h] * relu(q[t, h] . k[j] * scale)``.

    The dot products run in the inputs' dtype (callers cast; the paged backend keeps BF16), the
    head sum in float32. One ``(Q*Hi, Di) @ (Di, L)`` product per leading index (broadcasting
    ``k`` against every query would copy it Q times). What makes each element's value the same
    for any Q, L or batch (measured with MKL on the CPU, where torch's own choices were not):

    - the keys are padded with zeros to a multiple of ``_KEY_BLOCK`` positions: the matmul's
      last partial block of columns (and a product only a few columns wide) took another
      kernel, with other roundings, so a position's dot depended on L;
    - the heads are summed one by one, in order: ``sum(dim=-2)`` over 8 or more heads added
      the columns of the vectorised part and of the tail in different orders.

    Differentiable (the indexer's training loss uses it).
    """
    *lead, num_queries, heads, dim = q.shape
    length = k.shape[-2]
    if length % _KEY_BLOCK:
        k = F.pad(k, (0, 0, 0, -length % _KEY_BLOCK))
    flat = q.reshape(*lead, num_queries * heads, dim)
    dots = torch.matmul(flat, k.transpose(-1, -2))[..., :length]  # (..., Q*Hi, L)
    dots = torch.relu(dots * scale).unflatten(-2, (num_queries, heads)).float()
    weighted = dots * weights.float().unsqueeze(-1)  # (..., Q, Hi, L)
    total = weighted[..., 0, :]
    for head in range(1, heads):
        total = total + weighted[..., head, :]
    return total


def _ordered_bits(scores: torch.Tensor) -> torch.Tensor:
    """float32 -> int32 with the same order (``-0.0`` first made ``+0.0``: they are equal)."""
    bits = (scores + 0.0).contiguous().view(torch.int32)
    # Negative floats order backwards as integers: flip all but their sign bit.
    return bits ^ ((bits >> 31) & _LOW_BITS)


def _check(scores: torch.Tensor, count: int) -> None:
    if scores.dtype != torch.float32:
        raise ValueError(f"index scores must be float32, got {scores.dtype}")
    if not 0 <= count <= scores.shape[-1]:
        raise ValueError(f"cannot select {count} of {scores.shape[-1]} positions")


def top_positions(scores: torch.Tensor, count: int) -> torch.Tensor:
    """``(..., L)`` float32 scores -> ``(..., count)`` int64 positions: the ``count`` highest
    scores and, among equal scores at the cut, the earliest positions; ``-1`` for ``-inf``
    scores (masked: future or padding positions, which never win over a real one). The set is
    ``top_positions_reference``'s; the order within it may differ.

    A row whose ``count``-th and next scores differ has one answer, which ``topk`` gives
    whatever its tie order; on the CPU only the rows tied at the cut (~2% past ``index_topk``
    on text) pay for ``_by_key``, which is ~1.4x a ``topk``. Elsewhere every row takes it: no
    host sync to find the tied ones.
    """
    _check(scores, count)
    if scores.device.type != "cpu" or count == scores.shape[-1]:
        return _by_key(scores, count)
    values, picked = scores.topk(count + 1, dim=-1)
    cut, after = values[..., count - 1], values[..., count]
    picked, values = picked[..., :count], values[..., :count]
    tied = (cut == after) & (cut != float("-inf"))  # at -inf only masked positions tie
    num_tied = int(tied.sum())
    if num_tied * 4 > tied.numel():  # copying many rows out and back costs more than all
        return _by_key(scores, count)
    if num_tied:
        picked[tied] = _by_key(scores[tied], count)
        values = scores.gather(-1, picked)
    return picked.masked_fill(values == float("-inf"), -1)


def _by_key(scores: torch.Tensor, count: int) -> torch.Tensor:
    """``top_positions`` in one ``topk`` over ``score_bits << 32 | (2**32 - 1 - position)``:
    the keys are distinct, so the answer does not depend on how ``topk`` orders equal values
    (a stable sort of the whole row would cost more than the selection)."""
    positions = torch.arange(scores.shape[-1], dtype=torch.int64, device=scores.device)
    key = _ordered_bits(scores).to(torch.int64) << _POSITION_BITS
    key |= (1 << _POSITION_BITS) - 1 - positions
    picked = key.topk(count, dim=-1).indices
    return picked.masked_fill(scores.gather(-1, picked) == float("-inf"), -1)


def top_positions_reference(
    scores: torch.Tensor, count: int, mark_masked: bool = True
) -> torch.Tensor:
    """``top_positions`` the plain way: a stable descending sort keeps equal scores in position
    order, then the first ``count``."""
    _check(scores, count)
    order = torch.sort(scores, dim=-1, descending=True, stable=True)
    picked = order.indices[..., :count]
    if not mark_masked:
        return picked
    return picked.masked_fill(order.values[..., :count] == float("-inf"), -1)
