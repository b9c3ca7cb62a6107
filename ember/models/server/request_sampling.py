"""Per-request token choice behind the engine's ``Sampler`` seam.

The engine hands the sampler one logits row per sequence that samples this step, and each
sequence carries an opaque ``sampling`` object: here a ``RequestSampling``. ``ServerSampler``
applies, per row, what the request asked for beyond plain sampling: the grammar mask of
constrained decoding (JSON mode, JSON schema, required tool calls), ``logit_bias``,
``min_tokens`` (stop tokens masked until then) and ``min_p``; then the batched sampler
(``ember.models.sampling.Sampler``: penalties, temperature, top-k/top-p, per-request seeds); and
it records logprobs of the model's raw distribution when asked.

Everything here runs on the engine thread. A request's sampling state and grammar matcher
consume only tokens the engine actually kept: before each step they catch up with the
sequence's completion tokens, so a token the engine drops (an integrity failure recomputes the
step) or a preemption never desynchronises them.

A batch of plain greedy requests (the benchmark's case) takes the fast path: one ``max`` over
the batch, exactly the engine's ``GreedySampler``; ``reference_sample`` is the slow path for
any batch, and the tests compare the two.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch

from ember.models.constrain.session import ConstrainedDecoder, ConstraintSpec, GrammarCache
from ember.models.constrain.torch_masks import apply_token_masks
from ember.models.constrain.vocab import TokenVocabulary
from ember.models.sampling import Sampler, SamplingParams, SamplingState


@dataclass(frozen=True, slots=True)
class LogprobRecord:
    """One generated token's log probability and the most likely alternatives."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(slots=True)
class RequestSampling:
    """What one request asked for, plus its state (the engine thread owns the state)."""

    params: SamplingParams
    constraint: ConstraintSpec | None = None
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    min_tokens: int = 0
    min_p: float = 0.0
    stop_ids: frozenset[int] = frozenset()  # masked until min_tokens (EOS + stop_token_ids)
    # completion index -> record, written by the engine thread before the token is delivered
    logprobs: dict[int, LogprobRecord] = field(default_factory=dict)
    state: SamplingState | None = None
    decoder: ConstrainedDecoder | None = None

    @property
    def is_plain_greedy(self) -> bool:
        p = self.params
        return (
            p.greedy
            and not p.has_penalties
            and not p.logprobs
            and self.constraint is None
            and not self.logit_bias
            and self.min_tokens == 0
        )

    @property
    def grammar_finished(self) -> bool:
        return self.decoder is not None and self.decoder.is_finished


GREEDY = SamplingParams(temperature=0.0)


class _Sequence:
    """What the sampler reads of an engine sequence (``engine.sequence.Sequence``)."""

    token_ids: list[int]
    num_prompt_tokens: int
    sampling: object


class ServerSampler:
    """The engine's sampler for the model server (see the module docstring)."""

    def __init__(self, vocab_size: int, vocab: TokenVocabulary | None = None) -> None:
        self.vocab_size = vocab_size
        self.vocab = vocab
        self.grammars = GrammarCache()
        self._sampler = Sampler()

    def sample(self, logits: torch.Tensor, seqs: Sequence[_Sequence]) -> list[int]:
        requests = [s.sampling if isinstance(s.sampling, RequestSampling) else None for s in seqs]
        if all(r is None or r.is_plain_greedy for r in requests):
            # max().indices: argmax's first-index tie rule, and much faster on CPU.
            return logits.max(dim=-1).indices.tolist()
        return self._sample_rows(logits, seqs, requests)

    def _sample_rows(
        self,
        logits: torch.Tensor,
        seqs: Sequence[_Sequence],
        requests: Sequence[RequestSampling | None],
    ) -> list[int]:
        rows = [r if r is not None else RequestSampling(GREEDY) for r in requests]
        for seq, request in zip(seqs, rows, strict=True):
            self._catch_up(seq, request)
        adjusted = logits.float().clone()
        masks = []
        for row, request in enumerate(rows):
            self._adjust_row(adjusted[row], request)
            mask = request.decoder.allowed_token_mask() if request.decoder is not None else None
            masks.append(mask if mask is None or mask.count() else None)
        apply_token_masks(adjusted, masks)
        states = [r.state for r in rows]
        out = self._sampler(adjusted, states, record=False)  # type: ignore[arg-type]
        tokens = out.token_ids.tolist()
        self._record_logprobs(logits, seqs, rows, tokens)
        return tokens

    def _catch_up(self, seq: _Sequence, request: RequestSampling) -> None:
        """Bring the state and the matcher up to the tokens the engine kept."""
        if request.state is None:
            prompt = seq.token_ids[: seq.num_prompt_tokens]
            # Logprobs are taken here, from the raw logits, not by the batched sampler.
            params = replace(request.params, logprobs=False, top_logprobs=0)
            request.state = SamplingState.create(params, self.vocab_size, prompt)
            if request.constraint is not None:
                if self.vocab is None:
                    raise ValueError("constrained decoding needs the tokenizer's vocabulary")
                request.decoder = self.grammars.decoder(request.constraint, self.vocab)
        completion = seq.token_ids[seq.num_prompt_tokens :]
        for token in completion[request.state.num_generated :]:
            request.state.append(token)
            if request.decoder is not None:
                request.decoder.advance(token)

    def _adjust_row(self, row: torch.Tensor, request: RequestSampling) -> None:
        assert request.state is not None
        if request.logit_bias:
            ids = torch.tensor(list(request.logit_bias), dtype=torch.long)
            ids_ok = ids < row.shape[0]
            values = torch.tensor(list(request.logit_bias.values()), dtype=row.dtype)
            row[ids[ids_ok]] += values[ids_ok]
        if request.state.num_generated < request.min_tokens and request.stop_ids:
            ids = [t for t in request.stop_ids if t < row.shape[0]]
            row[ids] = float("-inf")
        params = request.params
        if request.min_p > 0.0 and not params.greedy:
            cutoff = row.max() + params.temperature * math.log(request.min_p)
            row.masked_fill_(row < cutoff, float("-inf"))

    def _record_logprobs(
        self,
        logits: torch.Tensor,
        seqs: Sequence[_Sequence],
        rows: Sequence[RequestSampling],
        tokens: list[int],
    ) -> None:
        wanted = [i for i, r in enumerate(rows) if r.params.logprobs]
        if not wanted:
            return
        raw = torch.log_softmax(logits[wanted].float(), dim=-1)
        top_k = max(rows[i].params.top_logprobs for i in wanted)
        top_values = top_ids = None
        if top_k:
            top_values, top_ids = torch.topk(raw, min(top_k, raw.shape[1]), dim=-1)
        for n, i in enumerate(wanted):
            request, token = rows[i], tokens[i]
            k = request.params.top_logprobs
            top: tuple[tuple[int, float], ...] = ()
            if k and top_ids is not None and top_values is not None:
                top = tuple(zip(top_ids[n, :k].tolist(), top_values[n, :k].tolist(), strict=True))
            index = len(seqs[i].token_ids) - seqs[i].num_prompt_tokens
            request.logprobs[index] = LogprobRecord(token, float(raw[n, token]), top)


def reference_sample(
    sampler: ServerSampler, logits: torch.Tensor, seqs: Sequence[_Sequence]
) -> list[int]:
    """The slow path for every row, fast path or not (tests compare the two)."""
    requests = [s.sampling if isinstance(s.sampling, RequestSampling) else None for s in seqs]
    return sampler._sample_rows(logits, seqs, requests)
