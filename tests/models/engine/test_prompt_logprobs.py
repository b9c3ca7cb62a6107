"""The engine's prompt logprobs equal the slow path's (a whole-sequence forward, one position
at a time) on random prompts: across chunked prefill, a warm prefix cache, preemption and
integrity checks; and a request that does not ask gets none."""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.engine.config import EngineConfig
from ember.models.engine.engine_types import RequestOutput
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.logprob_types import PromptLogprobSpec, PromptTokenLogprob
from ember.models.engine.prompt_logprobs import (
    PromptRowPlan,
    reference_prompt_logprobs,
    score_rows,
)
from ember.models.engine.sequence import StopCriteria
from ember.models.sampling import SamplingParams
from tests.models.engine.toy_models import ToyConfig, ToyModel


def _run(engine: LLMEngine) -> dict[str, list[RequestOutput]]:
    outputs: dict[str, list[RequestOutput]] = {}
    while engine.has_unfinished():
        for output in engine.step():
            assert output.error is None, output.error
            outputs.setdefault(output.request_id, []).append(output)
    return outputs


def _prompt_logprobs(outputs: list[RequestOutput]) -> tuple[PromptTokenLogprob, ...] | None:
    """The request's prompt logprobs: on its first output, and on no other."""
    assert all(o.prompt_logprobs is None for o in outputs[1:])
    return outputs[0].prompt_logprobs


def _assert_close(got: tuple[PromptTokenLogprob, ...], want: list[PromptTokenLogprob]) -> None:
    assert [g.token_id for g in got] == [w.token_id for w in want]
    assert torch.allclose(
        torch.tensor([g.logprob for g in got]), torch.tensor([w.logprob for w in want]), atol=1e-4
    )
    # Ranks and alternatives: equal where the reference's values are not near-ties.
    for g, w in zip(got, want, strict=True):
        assert abs(g.rank - w.rank) <= 1
        assert len(g.top) == len(w.top)
        for (_, gv), (_, wv) in zip(g.top, w.top, strict=True):
            assert abs(gv - wv) < 1e-4


@pytest.mark.parametrize(
    ("kind", "integrity"), [("gqa", "full"), ("mla", "sampled"), ("dsa", "off")]
)
def test_prompt_logprobs_match_a_whole_sequence_forward(kind: str, integrity: str) -> None:
    model = ToyModel(ToyConfig(kind=kind), seed=11)
    rng = random.Random(f"prompt-logprobs-{kind}")
    prompts = [[rng.randrange(97) for _ in range(rng.randint(2, 40))] for _ in range(10)]
    specs = [PromptLogprobSpec(start=rng.randint(1, 3), top=rng.choice([0, 1, 5])) for _ in prompts]
    config = EngineConfig(
        max_total_tokens=96,  # 24 pages of 4: too few for all at once (preemption)
        page_size=4,
        max_num_seqs=6,
        max_num_batched_tokens=12,  # prompts up to 40 tokens arrive in chunks
        integrity=integrity,
        integrity_sample_period=2,
        init_new_token_ratio=0.0,
        min_new_token_ratio=0.0,
    )
    engine = LLMEngine(model, model.kv_layout(), config)
    # Warm the prefix cache with every prompt: asking for prompt logprobs must not skip a page.
    engine.generate(prompts, StopCriteria(max_tokens=2))
    for i, (prompt, spec) in enumerate(zip(prompts, specs, strict=True)):
        engine.add_request(f"p{i}", prompt, StopCriteria(max_tokens=10), prompt_logprobs=spec)
        engine.add_request(f"n{i}", prompt, StopCriteria(max_tokens=10))  # does not ask
    outputs = _run(engine)
    for i, (prompt, spec) in enumerate(zip(prompts, specs, strict=True)):
        want = reference_prompt_logprobs(model.reference_forward(prompt), prompt, spec)
        got = _prompt_logprobs(outputs[f"p{i}"])
        assert got is not None and len(got) == max(0, len(prompt) - spec.start)
        _assert_close(got, want)
        assert _prompt_logprobs(outputs[f"n{i}"]) is None
    assert engine.stats.preemptions > 0, "the pool should have been too small"
    assert engine.block_manager.stats.prefix_hits > 0, "the requests that do not ask hit"
    assert engine._num_prompt_logprob_seqs == 0


def test_a_prompt_only_request_scores_its_prompt_from_a_late_start() -> None:
    model = ToyModel(ToyConfig(kind="gqa"), seed=4)
    config = EngineConfig(
        max_total_tokens=256, page_size=4, max_num_seqs=4, max_num_batched_tokens=8
    )
    engine = LLMEngine(model, model.kv_layout(), config)
    prompt = list(range(3, 33))
    engine.generate([prompt], StopCriteria(max_tokens=1))  # cache all 7 full pages
    sampling = SamplingParams(max_tokens=0, prompt_logprobs=2, prompt_logprobs_start=21)
    engine.add_request("score", prompt, sampling=sampling)
    outputs = _run(engine)["score"]
    assert len(outputs) == 1 and outputs[0].new_token_ids == ()
    want = reference_prompt_logprobs(
        model.reference_forward(prompt), prompt, PromptLogprobSpec(21, 2)
    )
    got = outputs[0].prompt_logprobs
    assert got is not None and len(got) == len(prompt) - 21
    _assert_close(got, want)
    # Pages wholly before position 20 come from the cache: 5 pages of 4.
    assert outputs[0].usage.cached_tokens == 20


def test_a_start_past_the_prompt_computes_nothing() -> None:
    model = ToyModel(ToyConfig(kind="mla"), seed=4)
    engine = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=64, page_size=4))
    engine.add_request(
        "a", [1, 2, 3], StopCriteria(max_tokens=1), prompt_logprobs=PromptLogprobSpec(start=3)
    )
    assert engine._num_prompt_logprob_seqs == 0
    assert _run(engine)["a"][0].prompt_logprobs == ()


def test_scoring_in_blocks_matches_the_reference_row_by_row() -> None:
    """More rows than one scoring block (a long chunk): the same numbers as one at a time."""
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 50, (600,), generator=generator).tolist()
    logits = torch.randn(600, 50, generator=generator).to(torch.bfloat16)
    plan = PromptRowPlan(list(range(599)), prompt[1:], [(1, 0, 599, 3)])
    scored = score_rows(logits[:599], plan, num_entries=2)
    assert scored[0] is None and scored[1] is not None
    _assert_close(
        tuple(scored[1]), reference_prompt_logprobs(logits, prompt, PromptLogprobSpec(1, 3))
    )
