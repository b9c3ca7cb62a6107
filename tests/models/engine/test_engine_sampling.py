"""Sampling inside the engine: each request's own parameters, seeds and logprobs.

The reference is a single-sequence loop: full-recompute logits from ``reference_forward`` and
``ember.models.sampling.Sampler`` on a fresh state with the same parameters, one row at a time.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from ember.errors import InvalidModelInput
from ember.models.engine.config import EngineConfig
from ember.models.engine.engine_types import RequestOutput
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sampling import RequestSampler, SampleResult
from ember.models.sampling import Sampler, SamplingParams, SamplingState
from tests.models.engine.toy_models import ToyConfig, ToyModel

SEEDED = SamplingParams(temperature=0.9, top_k=20, seed=1234, max_tokens=8)


def _reference(model: ToyModel, prompt: list[int], params: SamplingParams) -> list[int]:
    state = SamplingState.create(params, model.config.vocab_size, prompt)
    tokens = list(prompt)
    sampler = Sampler()
    for _ in range(params.max_tokens or 8):
        logits = model.reference_forward(tokens)[-1:]
        tokens.append(int(sampler(logits, [state]).token_ids[0]))
    return tokens[len(prompt) :]


def _run(engine: LLMEngine) -> dict[str, list[RequestOutput]]:
    outputs: dict[str, list[RequestOutput]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            outputs.setdefault(out.request_id, []).append(out)
    return outputs


def _tokens(outputs: list[RequestOutput]) -> list[int]:
    return [t for o in outputs for t in o.new_token_ids]


@pytest.fixture(scope="module")
def model() -> ToyModel:
    return ToyModel(ToyConfig(kind="mla"), seed=8)


def test_a_seeded_request_gives_the_same_tokens_alone_batched_and_preempted(model) -> None:
    rng = random.Random(3)
    prompt = [rng.randrange(97) for _ in range(9)]
    want = _reference(model, prompt, SEEDED)
    alone = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=256, page_size=4))
    alone.add_request("s", prompt, sampling=SEEDED)
    assert _tokens(_run(alone)["s"]) == want
    # A crowded, small pool: chunked prefill, other requests (greedy and sampled), preemption.
    crowded = LLMEngine(
        model,
        model.kv_layout(),
        EngineConfig(
            max_total_tokens=64,
            page_size=4,
            max_num_seqs=6,
            max_num_batched_tokens=8,
            init_new_token_ratio=0.0,  # reserve no growth: the pool runs out and preempts
            min_new_token_ratio=0.0,
        ),
    )
    for i in range(5):
        other = [rng.randrange(97) for _ in range(rng.randint(3, 12))]
        params = SamplingParams(temperature=1.0, seed=i, max_tokens=8) if i % 2 else None
        crowded.add_request(f"o{i}", other, sampling=params)
    crowded.add_request("s", prompt, sampling=SEEDED)
    assert _tokens(_run(crowded)["s"]) == want
    assert crowded.stats.preemptions > 0


def test_logprobs_match_the_reference_distribution(model) -> None:
    prompt = [5, 6, 7, 8]
    params = SamplingParams(temperature=0.0, logprobs=True, top_logprobs=3, max_tokens=4)
    engine = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=128, page_size=4))
    engine.add_request("r", prompt, sampling=params)
    outputs = _run(engine)["r"]
    tokens = list(prompt)
    for out in outputs:
        (token,) = out.new_token_ids
        (entry,) = out.logprobs
        reference = torch.log_softmax(model.reference_forward(tokens)[-1].float(), -1)
        assert entry.logprob == pytest.approx(float(reference[token]), abs=1e-4)
        top = reference.topk(3)
        assert [t for t, _ in entry.top] == top.indices.tolist()
        assert entry.top[0][0] == token  # greedy: the chosen token is the most likely
        tokens.append(token)


def test_sampling_params_set_the_stop_rules(model) -> None:
    engine = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=128, page_size=4))
    greedy = _reference(model, [1, 2, 3], SamplingParams(temperature=0.0, max_tokens=6))
    stop_at = greedy[2]
    engine.add_request(
        "stop", [1, 2, 3], sampling=SamplingParams(temperature=0.0, stop_token_ids=(stop_at,))
    )
    engine.add_request("window", [1, 2, 3], sampling=SamplingParams(temperature=0.0))
    outputs = _run(engine)
    stopped = outputs["stop"]
    assert _tokens(stopped) == greedy[: greedy.index(stop_at) + 1]
    assert stopped[-1].finish_reason == "stop"
    # No max_tokens: the context window (max_total_tokens + 1 here) ends it.
    assert len(_tokens(outputs["window"])) == engine.max_model_len - 3
    assert outputs["window"][-1].finish_reason == "length"


def test_bad_sampling_ids_and_a_stop_string_abort(model) -> None:
    engine = LLMEngine(model, model.kv_layout(), EngineConfig(max_total_tokens=128, page_size=4))
    with pytest.raises(InvalidModelInput, match="stop_token_ids"):
        engine.add_request("bad", [1], sampling=SamplingParams(stop_token_ids=(10_000,)))
    engine.add_request("r", [1, 2], sampling=SamplingParams(temperature=0.0, max_tokens=50))
    engine.step()
    assert engine.abort("r", reason="stop")
    (final,) = engine.step()
    assert final.finished and final.finish_reason == "stop"
    assert engine.stats.pages_used == 0


class _FailsOneRequest:
    """A sampler (the engine's ``Sampler`` seam) that reports request ``bad``'s row as failed
    from its third token on, as the server's sampler reports a grammar that cannot go on."""

    def __init__(self) -> None:
        self.inner = RequestSampler()

    def sample(self, logits: torch.Tensor, seqs: list) -> SampleResult:
        result = self.inner.sample(logits, seqs)
        failed = {
            row: RuntimeError(f"request {seq.request_id!r}: the grammar cannot go on")
            for row, seq in enumerate(seqs)
            if seq.request_id == "bad" and seq.num_completion_tokens >= 2
        }
        return replace(result, failed=failed)


def test_a_failed_sample_ends_only_its_request(model) -> None:
    """A row the sampler reports as failed finishes that request with the error (its two
    tokens kept, the failed step's token never emitted); every other request runs on as if
    alone, and the engine keeps stepping."""
    rng = random.Random(9)
    prompts = {f"r{i}": [rng.randrange(97) for _ in range(rng.randint(3, 10))] for i in range(3)}
    prompts["bad"] = [rng.randrange(97) for _ in range(6)]
    config = EngineConfig(max_total_tokens=256, page_size=4)
    greedy = SamplingParams(temperature=0, max_tokens=6)
    engine = LLMEngine(model, model.kv_layout(), config, sampler=_FailsOneRequest())
    for request_id, prompt in prompts.items():
        engine.add_request(request_id, prompt, sampling=greedy)
    outputs = _run(engine)
    last = outputs["bad"][-1]
    assert last.finished and last.finish_reason == "error"
    assert "the grammar cannot go on" in str(last.error)
    assert len(_tokens(outputs["bad"])) == 2
    for request_id in ("r0", "r1", "r2"):
        alone = LLMEngine(model, model.kv_layout(), config)
        alone.add_request(request_id, prompts[request_id], sampling=greedy)
        assert _tokens(outputs[request_id]) == _tokens(_run(alone)[request_id])
        assert outputs[request_id][-1].finish_reason == "length"
