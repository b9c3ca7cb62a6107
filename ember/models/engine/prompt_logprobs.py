"""Prompt logprobs: the log-probability of each prompt token given the tokens before it.

A request that asks (``PromptLogprobSpec``: from which prompt token, how many alternatives)
gets, during its prefill chunks, the vocabulary projection of the rows that predict its prompt
tokens (row at position ``p`` predicts token ``p + 1``) besides its usual sampling row; their
float32 log-softmax gives each token's logprob, its rank and the top alternatives. Requests
that do not ask add no row, and a step where no scheduled request asks does no work here
(``ModelRunner`` plans only when the engine counts one running).

Across chunks and recomputes a sequence keeps what it collected (``Sequence.prompt_logprobs``),
and each step plans only the rows after it, so chunked prefill, preemption and integrity retries
(whose step's rows are dropped with its token) neither skip nor repeat a position. The prefix
cache may serve only pages before the first row still wanted (``Sequence.prompt_logprob_position``,
read by ``BlockManager.match_prefix``): their positions' logits were never computed.

``reference_prompt_logprobs`` is the slow path: the same numbers from a whole-sequence forward's
logits, for tests.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf
from dataclasses import dataclass

import torch

from ember.models.engine.logprob_types import PromptLogprobSpec, PromptTokenLogprob
from ember.models.engine.scheduler import ScheduledSeq

# Rows scored at once (bounds the float32 copy; any size gives the same numbers).
_SCORE_BLOCK = 256


@dataclass(frozen=True, slots=True)
class PromptRowPlan:
    """This step's prompt-logprob rows: ``rows`` index the flat batch, ``targets`` the token
    each row scores; ``entries`` are ``(scheduled index, first row in rows, count, top)``."""

    rows: list[int]
    targets: list[int]
    entries: list[tuple[int, int, int, int]]


def plan_rows(scheduled: SequenceOf[ScheduledSeq]) -> PromptRowPlan | None:
    """The rows of this step's flat batch that predict a prompt token still wanted; ``None``
    when there are none (every entry's chunk lies outside what its request asked)."""
    rows: list[int] = []
    targets: list[int] = []
    entries: list[tuple[int, int, int, int]] = []
    offset = 0
    for index, entry in enumerate(scheduled):
        seq = entry.seq
        start_row = offset
        offset += entry.num_new_tokens
        first = seq.prompt_logprob_position
        if first is None:
            continue
        # Positions p of this chunk predict tokens p + 1 < num_prompt_tokens; the last
        # prompt position predicts the first output token (the sampling row), not a prompt one.
        lo = max(entry.context_len, first)
        hi = min(entry.context_len + entry.num_new_tokens, seq.num_prompt_tokens - 1)
        if lo >= hi:
            continue
        spec = seq.prompt_logprob_spec
        assert spec is not None  # prompt_logprob_position says so
        entries.append((index, len(rows), hi - lo, spec.top))
        rows.extend(range(start_row + lo - entry.context_len, start_row + hi - entry.context_len))
        targets.extend(seq.token_ids[lo + 1 : hi + 1])
    if not rows:
        return None
    return PromptRowPlan(rows, targets, entries)


def score_rows(
    logits: torch.Tensor, plan: PromptRowPlan, num_entries: int
) -> list[list[PromptTokenLogprob] | None]:
    """``logits`` (len(plan.rows), V), the model's own logits of the planned rows -> per
    scheduled entry its prompt logprobs (``None`` for entries without rows).

    In float32, ``_SCORE_BLOCK`` rows at a time: a whole chunk's float32 copy of a real
    vocabulary (8192 rows x 163840) would be 5 GiB on top of the logits themselves."""
    targets = torch.tensor(plan.targets, dtype=torch.int64, device=logits.device)
    most = max(top for *_, top in plan.entries)
    chosen_list: list[float] = []
    rank_list: list[int] = []
    top_ids: list[list[int]] = []
    top_values: list[list[float]] = []
    for begin in range(0, logits.shape[0], _SCORE_BLOCK):
        block = logits[begin : begin + _SCORE_BLOCK].float().log_softmax(dim=-1)
        chosen = block.gather(1, targets[begin : begin + _SCORE_BLOCK, None])  # (B, 1)
        rank_list += ((block > chosen).sum(dim=-1) + 1).tolist()
        chosen_list += chosen[:, 0].tolist()
        if most:
            values, ids = block.topk(most, dim=-1)
            top_ids += ids.tolist()
            top_values += values.tolist()
    out: list[list[PromptTokenLogprob] | None] = [None] * num_entries
    for index, first, count, top in plan.entries:
        scored = []
        for row in range(first, first + count):
            alternatives: tuple[tuple[int, float], ...] = ()
            if top:
                alternatives = tuple(zip(top_ids[row][:top], top_values[row][:top], strict=True))
            scored.append(
                PromptTokenLogprob(
                    plan.targets[row], chosen_list[row], rank_list[row], alternatives
                )
            )
        out[index] = scored
    return out


def reference_prompt_logprobs(
    logits: torch.Tensor, prompt_ids: SequenceOf[int], spec: PromptLogprobSpec
) -> list[PromptTokenLogprob]:
    """The slow path: ``logits`` (S, V) of one whole-sequence forward over ``prompt_ids`` ->
    the logprobs of tokens ``spec.start`` to the last, one position at a time."""
    out = []
    for token in range(spec.start, len(prompt_ids)):
        row = torch.log_softmax(logits[token - 1].to(torch.float32), dim=-1)
        target = prompt_ids[token]
        value = row[target]
        rank = int((row > value).sum()) + 1
        top: tuple[tuple[int, float], ...] = ()
        if spec.top:
            values, ids = torch.topk(row, spec.top)
            top = tuple(zip(ids.tolist(), values.tolist(), strict=True))
        out.append(PromptTokenLogprob(target, float(value), rank, top))
    return out
