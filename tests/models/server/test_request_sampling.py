"""The server's sampler: the greedy fast path against the slow path, and what the slow path adds
(logit bias, min_tokens, grammar masks, logprobs, catching up with the tokens the engine kept)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

import pytest
import torch

from ember.models.constrain.session import ConstraintSpec
from ember.models.sampling import SamplingParams
from ember.models.server.request_sampling import (
    RequestSampling,
    ServerSampler,
    reference_sample,
)
from tests.models.constrain.fixtures import small_vocab

VOCAB = 300


@dataclass
class FakeSequence:
    """The three fields the sampler reads of an engine ``Sequence`` (its typed seam)."""

    token_ids: list[int]
    num_prompt_tokens: int
    sampling: object = None
    _extra: list[int] = field(default_factory=list)


def _seqs(count: int, sampling: list[object], rng: random.Random) -> list[FakeSequence]:
    out = []
    for i in range(count):
        prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 8))]
        out.append(FakeSequence(prompt, len(prompt), sampling[i]))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_greedy_fast_path_equals_the_slow_path(seed: int) -> None:
    rng = random.Random(seed)
    torch.manual_seed(seed)
    logits = torch.randn(7, VOCAB, dtype=torch.bfloat16)
    sampling: list[object] = [
        None if i % 2 else RequestSampling(SamplingParams(temperature=0.0)) for i in range(7)
    ]
    seqs = _seqs(7, sampling, rng)
    sampler = ServerSampler(VOCAB)
    fast = sampler.sample(logits, seqs)
    assert fast == reference_sample(sampler, logits, seqs)
    assert fast == [int(row.float().argmax()) for row in logits]


def test_logit_bias_and_min_tokens() -> None:
    logits = torch.zeros(2, VOCAB)
    logits[:, 5] = 3.0  # token 5 would win
    biased = RequestSampling(SamplingParams(temperature=0.0), logit_bias={42: 10.0})
    held = RequestSampling(SamplingParams(temperature=0.0), min_tokens=2, stop_ids=frozenset({5}))
    seqs = [FakeSequence([1, 2], 2, biased), FakeSequence([1, 2], 2, held)]
    sampler = ServerSampler(VOCAB)
    assert sampler.sample(logits, seqs)[0] == 42
    assert sampler.sample(logits, seqs)[1] != 5  # no stop before min_tokens
    seqs[1].token_ids += [7, 8]  # the engine kept two tokens: stopping is allowed now
    assert sampler.sample(logits, seqs)[1] == 5


def test_logprobs_are_of_the_raw_distribution() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, VOCAB)
    asked = RequestSampling(
        SamplingParams(temperature=0.0, logprobs=True, top_logprobs=3), logit_bias={9: 50.0}
    )
    seqs = [FakeSequence([1], 1, asked), FakeSequence([2], 1, None)]
    token = ServerSampler(VOCAB).sample(logits, seqs)[0]
    assert token == 9
    raw = torch.log_softmax(logits[0], dim=-1)
    record = asked.logprobs[0]  # keyed by completion index
    assert record.token_id == 9 and record.logprob == pytest.approx(float(raw[9]), abs=1e-6)
    top = torch.topk(raw, 3)
    assert [t for t, _ in record.top] == top.indices.tolist()


def test_same_seed_same_tokens_whatever_the_batch() -> None:
    torch.manual_seed(3)
    logits = torch.randn(3, VOCAB)

    def draw(rows: list[int]) -> int:
        request = RequestSampling(SamplingParams(temperature=1.0, seed=77))
        seqs = [FakeSequence([1], 1, request if r == 0 else None) for r in rows]
        return ServerSampler(VOCAB).sample(logits[rows], seqs)[0]

    assert draw([0]) == draw([0, 1, 2])


def test_grammar_mask_follows_only_the_tokens_the_engine_kept() -> None:
    vocab = small_vocab()
    spec = ConstraintSpec(
        json="schema",
        schema={
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        },
    )
    request = RequestSampling(SamplingParams(temperature=0.0), constraint=spec)
    seq = FakeSequence([0], 1, request)
    sampler = ServerSampler(vocab.size, vocab)
    rng = torch.Generator().manual_seed(5)
    for step in range(200):
        logits = torch.randn(1, vocab.size, generator=rng)
        token = sampler.sample(logits, [seq])[0]
        if token in vocab.eos_ids:
            break
        if step % 3 == 2:
            continue  # the engine dropped this token (an integrity retry): it never happened
        seq.token_ids.append(token)
    text = b"".join(vocab.tokens[t] or b"" for t in seq.token_ids[1:]).decode()
    assert json.loads(text) in ({"ok": True}, {"ok": False})
