"""The batched engine (greedy) emits exactly the tokens of a single-sequence full recompute.

Many concurrent sequences of different lengths, a small token budget (chunked prefill, mixed
prefill + decode steps) and a KV pool too small for all of them (preemption by recompute), for
each attention kind, in float32 (R13).
"""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel, greedy_reference


def _prompts(seed: int, count: int, max_len: int, vocab: int = 97) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(1, max_len))] for _ in range(count)]


@pytest.mark.parametrize(
    ("kind", "integrity"), [("gqa", "full"), ("mla", "sampled"), ("dsa", "off"), ("dsa", "full")]
)
def test_batched_engine_matches_full_recompute(kind: str, integrity: str) -> None:
    model = ToyModel(ToyConfig(kind=kind), seed=3)
    prompts = _prompts(seed=7, count=12, max_len=24)
    want = [greedy_reference(model, prompt, 10) for prompt in prompts]
    config = EngineConfig(
        max_total_tokens=120,  # 30 pages of 4: far less than 12 sequences need at once
        page_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=16,  # prompts up to 24 tokens arrive in chunks
        integrity=integrity,
        integrity_sample_period=3,
        init_new_token_ratio=0.0,  # reserve no growth: the pool runs out and preempts
        min_new_token_ratio=0.0,
    )
    engine = LLMEngine(model, model.kv_layout(), config)
    got = engine.generate(prompts, StopCriteria(max_tokens=10))
    assert got == want
    assert engine.stats.preemptions > 0, "the pool should have been too small"
    assert engine.stats.integrity_failures == 0
    assert engine.stats.pages_used == 0, "every page is free once all requests finished"


def test_shared_prefixes_hit_the_cache_and_still_match() -> None:
    model = ToyModel(ToyConfig(kind="mla"), seed=5)
    config = EngineConfig(max_total_tokens=400, page_size=4, max_num_seqs=4, integrity="full")
    engine = LLMEngine(model, model.kv_layout(), config)
    system = list(range(10, 23))  # 13 tokens: 3 full pages of 4
    prompts = [system + tail for tail in _prompts(seed=2, count=6, max_len=5)]
    got = engine.generate(prompts[:1], StopCriteria(max_tokens=4))
    got += engine.generate(prompts[1:], StopCriteria(max_tokens=4))
    want = [greedy_reference(model, prompt, 4) for prompt in prompts]
    assert got == want
    # The 3 full pages of the shared 13-token prefix were reused by each later request.
    assert engine.block_manager.stats.prefix_hits >= 5 * 12


def test_stop_tokens_max_tokens_and_usage() -> None:
    model = ToyModel(ToyConfig(kind="gqa"), seed=2)
    prompt = _prompts(seed=4, count=1, max_len=9)[0]
    reference = greedy_reference(model, prompt, 8)
    stop_at = reference[3]
    config = EngineConfig(max_total_tokens=256, page_size=4)
    engine = LLMEngine(model, model.kv_layout(), config)
    engine.add_request("a", prompt, StopCriteria(max_tokens=8, stop_token_ids=frozenset({stop_at})))
    engine.add_request("b", prompt, StopCriteria(max_tokens=5))
    outputs = []
    while engine.has_unfinished():
        outputs.extend(engine.step())
    final = {o.request_id: o for o in outputs if o.finished}
    tokens = {
        rid: [t for o in outputs if o.request_id == rid for t in o.new_token_ids] for rid in "ab"
    }
    first_stop = reference.index(stop_at)
    assert tokens["a"] == reference[: first_stop + 1] and final["a"].finish_reason == "stop"
    assert tokens["b"] == reference[:5] and final["b"].finish_reason == "length"
    assert final["b"].usage.prompt_tokens == len(prompt)
    assert final["b"].usage.completion_tokens == 5


def test_auto_kv_dtype_follows_the_model_weights() -> None:
    model = ToyModel(ToyConfig(kind="gqa"), seed=1, dtype=torch.bfloat16)
    engine = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=64, page_size=4))
    assert engine.kv_spec.dtype == "bf16"
    assert engine.pool.k is not None and engine.pool.k.dtype == torch.bfloat16
    assert len(engine.generate([[1, 2, 3]], StopCriteria(max_tokens=3))[0]) == 3


def test_max_tokens_0_is_a_prompt_only_pass() -> None:
    model = ToyModel(ToyConfig(kind="gqa"), seed=2)
    config = EngineConfig(
        max_total_tokens=256, page_size=4, max_num_seqs=4, max_num_batched_tokens=8
    )
    engine = LLMEngine(model, model.kv_layout(), config)
    prompt = _prompts(seed=5, count=1, max_len=20)[0] + [1] * 10  # > 8: chunked
    engine.add_request("a", prompt, StopCriteria(max_tokens=0))
    outputs = []
    while engine.has_unfinished():
        outputs.extend(engine.step())
    assert [o.new_token_ids for o in outputs] == [()]
    assert outputs[0].finished and outputs[0].finish_reason == "length"
    assert outputs[0].usage.prompt_tokens == len(prompt)
    assert outputs[0].usage.completion_tokens == 0
    assert engine.stats.generation_tokens == 0
    assert engine.stats.prompt_tokens_computed == len(prompt)
    assert engine.stats.pages_used == 0
