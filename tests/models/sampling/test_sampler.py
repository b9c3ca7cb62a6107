"""The batched sampler against the per-row reference, seeds, batch invariance, penalties."""

from __future__ import annotations

import math
import random

import pytest
import torch

from ember.errors import InvalidModelInput
from ember.models.sampling import (
    Sampler,
    SamplingParams,
    SamplingState,
    process_logits,
    sample_row_reference,
)

VOCAB = 97  # not a power of two, on purpose
PROMPT = [3, 4, 4, 90]


def _random_params(rng: random.Random, seed: int) -> SamplingParams:
    """A random mix of every knob, including greedy rows and rows without cuts."""
    logprobs = rng.random() < 0.4
    return SamplingParams(
        temperature=rng.choice([0.0, 0.3, 0.7, 1.0, 1.6, 2.0]),
        top_p=rng.choice([1.0, 1.0, 0.9, 0.5, 0.05]),
        top_k=rng.choice([0, 0, -1, 1, 5, 40, 500]),
        min_p=rng.choice([0.0, 0.0, 0.05, 0.3]),
        seed=seed,
        min_tokens=rng.choice([0, 0, 3, 40]),
        stop_token_ids=tuple(rng.sample(range(VOCAB), rng.choice([0, 2]))),
        logit_bias=tuple((t, rng.uniform(-100, 100)) for t in rng.sample(range(VOCAB), 3))
        if rng.random() < 0.3
        else (),
        repetition_penalty=rng.choice([1.0, 1.0, 1.3, 0.7]),
        frequency_penalty=rng.choice([0.0, 0.0, 0.5, -1.0]),
        presence_penalty=rng.choice([0.0, 0.0, 1.5, -0.5]),
        logprobs=logprobs,
        top_logprobs=rng.choice([0, 1, 5, 20]) if logprobs else 0,
    )


EOS = (0, 96)


def _states(params: list[SamplingParams]) -> list[SamplingState]:
    return [SamplingState.create(p, VOCAB, PROMPT, eos_token_ids=EOS) for p in params]


@pytest.mark.parametrize("candidates", [4, 1024])  # 4: the candidate shortcut and its fallback
@pytest.mark.parametrize("trial", range(4))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batched_sampler_equals_reference_token_for_token(
    trial: int, dtype: torch.dtype, candidates: int
) -> None:
    rng = random.Random(trial)
    params = [_random_params(rng, seed=1000 * trial + i) for i in range(12)]
    fast, slow = _states(params), _states(params)
    sampler = Sampler(candidates=candidates)
    gen = torch.Generator().manual_seed(trial)
    for _ in range(15):
        # bf16 logits have many exact ties: the tie order (by token id) must match too.
        logits = (torch.randn(len(params), VOCAB, generator=gen) * 3).to(dtype)
        out = sampler(logits, fast)
        for row, state in enumerate(slow):
            ref = sample_row_reference(logits[row], state)
            assert int(out.token_ids[row]) == ref.token, (row, params[row])
            if ref.logprob is None:
                continue
            assert out.logprobs is not None
            assert float(out.logprobs[row]) == pytest.approx(ref.logprob, abs=1e-4)
            k = params[row].top_logprobs
            if k:
                assert out.top_logprobs is not None and out.top_logprob_ids is not None
                values = out.top_logprobs[row, :k].tolist()
                assert values == pytest.approx([v for _, v in ref.top_logprobs], abs=1e-4)
                # Ids may differ only among exactly tied values.
                ids = out.top_logprob_ids[row, :k].tolist()
                assert {t for t, _ in ref.top_logprobs} == set(ids) or dtype == torch.bfloat16
    assert [s.output_token_ids for s in fast] == [s.output_token_ids for s in slow]


def test_greedy_is_the_argmax_of_penalised_logits() -> None:
    logits = torch.randn(5, VOCAB, generator=torch.Generator().manual_seed(1))
    states = _states([SamplingParams(temperature=0.0)] * 5)
    out = Sampler()(logits, states)
    assert torch.equal(out.token_ids, logits.argmax(-1))
    assert out.logprobs is None and out.top_logprobs is None
    assert all(s.generator is None for s in states)  # greedy never draws


def _run(params: SamplingParams, logits_seq: list[torch.Tensor], row: int, batch: int) -> list[int]:
    """Sample ``params`` at position ``row`` of a batch filled with other random requests."""
    rng = random.Random(batch * 31 + row)
    others = [_random_params(rng, seed=rng.randrange(10**9)) for _ in range(batch)]
    others[row] = params
    states = _states(others)
    filler = torch.Generator().manual_seed(batch)
    tokens = []
    for logits in logits_seq:
        full = torch.randn(batch, VOCAB, generator=filler) * 3
        full[row] = logits
        tokens.append(int(Sampler()(full, states).token_ids[row]))
    return tokens


def test_same_seed_same_tokens_whatever_the_batch() -> None:
    gen = torch.Generator().manual_seed(2)
    logits_seq = [torch.randn(VOCAB, generator=gen) * 2 for _ in range(25)]
    params = SamplingParams(temperature=1.0, top_p=0.9, seed=1234)
    alone = _run(params, logits_seq, row=0, batch=1)
    assert _run(params, logits_seq, row=5, batch=8) == alone
    assert _run(params, logits_seq, row=63, batch=64) == alone
    other_seed = _run(SamplingParams(temperature=1.0, top_p=0.9, seed=1235), logits_seq, 0, 1)
    assert other_seed != alone


def test_without_a_seed_requests_differ() -> None:
    logits = torch.zeros(1, VOCAB)
    runs = []
    for _ in range(2):
        state = SamplingState.create(SamplingParams(), VOCAB)
        runs.append([int(Sampler()(logits, [state]).token_ids[0]) for _ in range(20)])
    assert runs[0] != runs[1]


def test_empirical_frequencies_match_the_filtered_distribution() -> None:
    """Not just equal to the reference: actually distributed as top-k/top-p/temperature say."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    params = SamplingParams(temperature=0.5, top_k=4, top_p=0.95, seed=9)
    state = SamplingState.create(params, 6)
    draws = 4000
    counts = torch.zeros(6)
    for _ in range(draws):
        counts[int(Sampler()(logits, [state], record=False).token_ids[0])] += 1
    probs = torch.softmax(logits[0] / 0.5, dim=0)  # [0.829, 0.112, 0.042, 0.015, ...]
    # top-k 4 drops tokens 4, 5; top-p 0.95: mass ahead of token 2 is 0.941 < 0.95 (kept),
    # ahead of token 3 it is 0.983 >= 0.95 (dropped).
    assert float(probs[:2].sum()) < 0.95 <= float(probs[:3].sum())
    assert counts[3:].sum() == 0
    expected = probs[:3] / probs[:3].sum()
    for token in range(3):
        p = float(expected[token])
        sigma = math.sqrt(p * (1 - p) / draws)
        assert abs(float(counts[token]) / draws - p) < 4 * sigma, (token, counts)


def test_penalties_on_a_hand_checked_case() -> None:
    params = SamplingParams(
        temperature=0.0, repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=1.0
    )
    state = SamplingState.create(params, 6, prompt_token_ids=[0])
    for token in (1, 1, 2):
        state.append(token)
    logits = torch.tensor([[4.0, 4.0, -2.0, 3.0, -1.0, 0.0]])
    got = process_logits(logits, [state])[0].tolist()
    # token 0: prompt only -> 4 / 2 = 2 (no frequency/presence: those count generated tokens)
    # token 1: generated twice -> 4 / 2 - 0.5 * 2 - 1 = 0
    # token 2: generated once, negative -> -2 * 2 - 0.5 - 1 = -5.5
    assert got == [2.0, 0.0, -5.5, 3.0, -1.0, 0.0]
    assert Sampler()(logits, [state], record=False).token_ids.tolist() == [3]


def test_negative_penalties_encourage_repeats() -> None:
    params = SamplingParams(temperature=0.0, presence_penalty=-2.0)
    state = SamplingState.create(params, 4)
    state.append(2)
    logits = torch.tensor([[1.0, 0.5, 0.0, -5.0]])
    assert Sampler()(logits, [state]).token_ids.tolist() == [2]


def test_top_p_zero_and_top_k_one_keep_only_the_best() -> None:
    logits = torch.randn(2, VOCAB, generator=torch.Generator().manual_seed(4))
    states = _states([SamplingParams(top_p=0.0, seed=1), SamplingParams(top_k=1, seed=1)])
    for _ in range(5):
        assert torch.equal(Sampler()(logits, states).token_ids, logits.argmax(-1))


def test_shape_mismatch_and_bad_stop_ids() -> None:
    with pytest.raises(ValueError, match="one row per state"):
        Sampler()(torch.zeros(2, VOCAB), _states([SamplingParams()]))
    with pytest.raises(InvalidModelInput, match="below the vocabulary size 97"):
        SamplingState.create(SamplingParams(stop_token_ids=(97,)), VOCAB)
    with pytest.raises(InvalidModelInput, match="logit_bias must name token ids"):
        SamplingState.create(SamplingParams(logit_bias=((200, 1.0),)), VOCAB)


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    """Uniform logits: probabilities are exactly 0.25, so the boundary is exact: p = 0.5 keeps
    the first two tokens (ties by id), not a third whose mass ahead is exactly 0.5."""
    logits = torch.zeros(1, 4)
    state = SamplingState.create(SamplingParams(top_p=0.5, seed=3), 4)
    seen = {int(Sampler()(logits, [state]).token_ids[0]) for _ in range(200)}
    assert seen == {0, 1}
    reference = SamplingState.create(SamplingParams(top_p=0.5, seed=3), 4)
    assert {sample_row_reference(logits[0], reference).token for _ in range(200)} == {0, 1}


def test_top_p_applies_to_the_mass_renormalised_after_top_k() -> None:
    """probs 0.4, 0.3, 0.2, 0.1; top-k 2 leaves 4/7, 3/7; top-p 0.5 then keeps only the first
    (mass ahead of the second is 4/7 >= 0.5), whereas over the full mass (0.4 < 0.5) it would
    keep two."""
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log()
    params = SamplingParams(top_k=2, top_p=0.5, seed=1)
    fast, slow = SamplingState.create(params, 4), SamplingState.create(params, 4)
    assert {int(Sampler()(logits, [fast]).token_ids[0]) for _ in range(100)} == {0}
    assert {sample_row_reference(logits[0], slow).token for _ in range(100)} == {0}


def test_min_p_keeps_tokens_above_a_fraction_of_the_best() -> None:
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    state = SamplingState.create(SamplingParams(min_p=0.4, seed=2), 4)  # keeps p >= 0.2
    assert {int(Sampler()(logits, [state]).token_ids[0]) for _ in range(200)} == {0, 1}


def test_min_tokens_masks_eos_and_stop_ids_then_lets_them_through() -> None:
    logits = torch.tensor([[5.0, 0.0, 0.0, 9.0]])  # token 3 (EOS) dominates
    params = SamplingParams(temperature=0.0, min_tokens=2, stop_token_ids=(0,))
    state = SamplingState.create(params, 4, eos_token_ids=(3,))
    tokens = [int(Sampler()(logits, [state]).token_ids[0]) for _ in range(3)]
    assert tokens == [1, 1, 3]
    ignoring = SamplingState.create(
        SamplingParams(temperature=0.0, min_tokens=2, ignore_eos=True), 4, eos_token_ids=(3,)
    )
    assert int(Sampler()(logits, [ignoring]).token_ids[0]) == 3  # EOS is an ordinary token


def test_logit_bias_moves_the_choice() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0]])
    state = SamplingState.create(SamplingParams(temperature=0.0, logit_bias=((0, 5.0),)), 3)
    assert int(Sampler()(logits, [state]).token_ids[0]) == 0
    banned = SamplingState.create(SamplingParams(seed=1, logit_bias=((2, -100.0),)), 3)
    draws = {int(Sampler()(logits, [banned]).token_ids[0]) for _ in range(100)}
    assert 2 not in draws


@pytest.mark.parametrize("candidates", [1, 2, 8, 30])
def test_candidate_shortcut_equals_a_full_sort(candidates: int) -> None:
    """Rows that keep more than the candidates, or tie the candidates' edge, are redone."""
    from ember.models.sampling.draw import draw_cut

    gen = torch.Generator().manual_seed(candidates)
    # Coarse values: many exact ties, including at every candidate edge.
    probs = torch.softmax((torch.randn(40, VOCAB, generator=gen) * 2).round(), dim=-1)
    params = [
        SamplingParams(top_p=p, top_k=k, min_p=m)
        for p, k, m in zip(
            [0.3, 0.9, 1.0, 0.99, 0.5] * 8,
            [0, 0, 5, 0, 3, 0, 0, 0] * 5,
            [0.0, 0.0, 0.0, 0.2, 0.0] * 8,
            strict=True,
        )
        if p < 1.0 or k > 0 or m > 0
    ]
    probs = probs[: len(params)]
    uniform = torch.rand(len(params), generator=gen, dtype=torch.float64)
    full = draw_cut(probs, params, uniform, candidates=VOCAB)
    assert torch.equal(draw_cut(probs, params, uniform, candidates=candidates), full)


@pytest.mark.parametrize("huge", [VOCAB, 2**63, 10**308])
def test_a_top_k_past_the_vocabulary_cuts_nothing(huge: int) -> None:
    """As SGLang: any top_k is accepted, and one past the vocabulary is no cut. One past int64
    used to overflow building the batch's tensor (on the engine thread: every request failed)."""
    from ember.models.sampling.draw import draw_cut

    gen = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(3, VOCAB, generator=gen), dim=-1)
    uniform = torch.rand(3, generator=gen, dtype=torch.float64)
    params = [SamplingParams(top_k=huge, top_p=p) for p in (0.5, 0.9, 0.99)]
    plain = [SamplingParams(top_p=p) for p in (0.5, 0.9, 0.99)]
    assert torch.equal(draw_cut(probs, params, uniform), draw_cut(probs, plain, uniform))


def test_callers_logits_are_never_modified() -> None:
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(5))
    before = logits.clone()
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(seed=1, logit_bias=((3, 50.0),), min_tokens=2),
        SamplingParams(seed=2, frequency_penalty=1.0, repetition_penalty=1.5),
    ]
    states = _states(params)
    for _ in range(3):
        Sampler()(logits, states)
    assert torch.equal(logits, before)
