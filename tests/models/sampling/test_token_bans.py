"""vLLM's ``allowed_token_ids`` and ``bad_words`` (as token sequences) at the sampler, and
SGLang's processed logprobs: the batched sampler against the slow reference on random rows,
and the rules on hand-made cases."""

from __future__ import annotations

import random

import pytest
import torch

from ember.errors import InvalidModelInput
from ember.models.sampling import Sampler, SamplingParams, SamplingState, sample_row_reference
from ember.models.sampling.bans import banned_words

VOCAB = 61


def _params(rng: random.Random, seed: int) -> SamplingParams:
    allowed = (
        tuple(rng.sample(range(VOCAB), rng.choice([1, 3, 20]))) if rng.random() < 0.5 else None
    )
    words = tuple(
        tuple(rng.randrange(VOCAB) for _ in range(rng.choice([1, 2, 3])))
        for _ in range(rng.choice([0, 1, 4]))
    )
    logprobs = rng.random() < 0.6
    return SamplingParams(
        temperature=rng.choice([0.0, 0.5, 1.0, 1.8]),
        top_k=rng.choice([0, 5]),
        top_p=rng.choice([1.0, 0.8]),
        min_p=rng.choice([0.0, 0.1]),
        seed=seed,
        repetition_penalty=rng.choice([1.0, 1.4]),
        logit_bias=((rng.randrange(VOCAB), 4.0),) if rng.random() < 0.3 else (),
        allowed_token_ids=allowed,
        bad_words_token_ids=words,
        logprobs=logprobs,
        top_logprobs=rng.choice([0, 3]) if logprobs else 0,
        logprobs_mode=rng.choice(["raw", "processed", "processed_cut"]),
    )


@pytest.mark.parametrize("trial", range(3))
def test_batched_sampler_equals_the_reference(trial: int) -> None:
    rng = random.Random(trial)
    params = [_params(rng, seed=100 * trial + i) for i in range(10)]
    fast = [SamplingState.create(p, VOCAB, [1, 2, 3]) for p in params]
    slow = [SamplingState.create(p, VOCAB, [1, 2, 3]) for p in params]
    gen = torch.Generator().manual_seed(trial)
    for _ in range(20):
        logits = torch.randn(len(params), VOCAB, generator=gen) * 3
        out = Sampler()(logits, fast)
        for row, state in enumerate(slow):
            ref = sample_row_reference(logits[row], state)
            assert int(out.token_ids[row]) == ref.token, (row, params[row])
            if params[row].allowed_token_ids is not None:
                assert ref.token in params[row].allowed_token_ids
            if ref.logprob is not None:
                assert out.logprobs is not None
                assert float(out.logprobs[row]) == pytest.approx(ref.logprob, abs=1e-4)
            if params[row].top_logprobs:
                assert out.top_logprobs is not None
                values = out.top_logprobs[row, : params[row].top_logprobs].tolist()
                assert values == pytest.approx([v for _, v in ref.top_logprobs], abs=1e-4)
    for state in fast:
        outputs = state.output_token_ids
        for word in state.params.bad_words_token_ids:
            n = len(word)
            assert all(tuple(outputs[i : i + n]) != word for i in range(len(outputs) - n + 1))


def test_a_longer_word_is_banned_only_where_it_would_be_completed() -> None:
    assert banned_words([(7,)], []) == [7]
    assert banned_words([(4, 5)], []) == []
    assert banned_words([(4, 5)], [9, 4]) == [5]
    assert banned_words([(4, 5)], [4, 9]) == []
    assert banned_words([(3, 4, 5)], [3, 4]) == [5]
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0, 9.0, 8.0]])  # greedy: 4, then 4 again
    state = SamplingState.create(SamplingParams(temperature=0.0, bad_words_token_ids=((4, 4),)), 6)
    tokens = [int(Sampler()(logits, [state]).token_ids[0]) for _ in range(3)]
    assert tokens == [4, 5, 4]  # "4 4" never appears; 4 alone does


def test_allowed_token_ids_restrict_even_a_greedy_row() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0, 9.0]])
    state = SamplingState.create(SamplingParams(temperature=0.0, allowed_token_ids=(0, 2)), 4)
    assert int(Sampler()(logits, [state]).token_ids[0]) == 2


def test_processed_logprobs_are_of_the_sampled_distribution() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.5]])
    params = SamplingParams(
        temperature=0.5, seed=1, logprobs=True, logprobs_mode="processed", logit_bias=((0, 2.0),)
    )
    out = Sampler()(logits, [SamplingState.create(params, 4)])
    token = int(out.token_ids[0])
    want = torch.log_softmax(torch.tensor([3.0, 2.0, 3.0, 0.5]) / 0.5, dim=-1)[token]
    assert out.logprobs is not None and float(out.logprobs[0]) == pytest.approx(float(want))


def test_processed_cut_logprobs_are_of_the_kept_tokens_renormalised() -> None:
    """vLLM's processed_logprobs: after the temperature and the cut, what is drawn from."""
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.5, 2.5]])
    params = SamplingParams(
        temperature=0.5,
        top_k=2,
        seed=1,
        logprobs=True,
        top_logprobs=4,
        logprobs_mode="processed_cut",
    )
    out = Sampler()(logits, [SamplingState.create(params, 5)])
    kept = torch.log_softmax(torch.tensor([3.0, 2.5]) / 0.5, dim=-1)  # tokens 2 and 4
    assert int(out.token_ids[0]) in (2, 4) and out.top_logprobs is not None
    assert out.top_logprob_ids is not None and out.top_logprob_ids[0, :2].tolist() == [2, 4]
    assert out.top_logprobs[0, :2].tolist() == pytest.approx(kept.tolist())
    assert out.top_logprobs[0, 2:].tolist() == [float("-inf")] * 2  # cut: not drawable
    greedy = SamplingParams(temperature=0.0, top_k=2, logprobs=True, logprobs_mode="processed_cut")
    out = Sampler()(logits, [SamplingState.create(greedy, 5)])
    assert out.logprobs is not None  # a greedy row: no temperature, no cut
    assert float(out.logprobs[0]) == pytest.approx(float(torch.log_softmax(logits[0], -1)[2]))


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"allowed_token_ids": ()}, "allowed_token_ids must be a non-empty list"),
        ({"bad_words_token_ids": ((),)}, "bad_words must be words that are at least one token"),
        ({"logprobs_mode": "logits"}, "logprobs_mode must be raw, processed or processed_cut"),
    ],
)
def test_bad_values_name_the_field(fields: dict, words: str) -> None:
    with pytest.raises(InvalidModelInput, match=words):
        SamplingParams(**fields)


def test_ids_past_the_vocabulary_are_refused() -> None:
    with pytest.raises(InvalidModelInput, match="allowed_token_ids must name token ids below"):
        SamplingState.create(SamplingParams(allowed_token_ids=(3, 70)), VOCAB)
    with pytest.raises(InvalidModelInput, match="bad_words must name token ids below"):
        SamplingState.create(SamplingParams(bad_words_token_ids=((70,),)), VOCAB)
