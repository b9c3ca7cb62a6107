"""GLM-5.x (DSA) in float32: a request gives the same tokens alone, batched and chunked.

Past ``index_topk`` (128) positions the indexer selects, and a selection is discrete: one
position kept instead of another moves a logprob by ~0.05 where float rounding moves it by
~1e-6. The shipped glmdsa-tiny's indexer scores tie exactly at the cut (relu zeroes whole
scores), and where ``torch.topk`` broke those ties by the batch's padded length, t2 and t5 here
moved by 0.013 and 0.007 batched and t5 changed tokens chunked.
"""

from __future__ import annotations

import random

import pytest
import torch

from ember.models.catalog import SHIPPED_CHECKPOINTS
from ember.models.engine.config import EngineConfig
from ember.models.engine.engine_types import RequestOutput
from ember.models.engine.llm_engine import LLMEngine
from ember.models.kv.spec import kv_layout_for
from ember.models.loader import LoadedModel, load_model
from ember.models.sampling import SamplingParams

SEED = 5
TARGETS = 6  # prompts of 129..230 tokens, each run alone and beside the others
STEPS = 8
GREEDY = SamplingParams(temperature=0.0, max_tokens=STEPS, logprobs=True, ignore_eos=True)


def _params(name: str) -> SamplingParams:
    """Every other request greedy, the rest sampled with their own seed."""
    i = int(name[1:])
    if i % 2 == 0:
        return GREEDY
    return SamplingParams(
        temperature=0.8, top_p=0.9, seed=100 + i, max_tokens=STEPS, logprobs=True, ignore_eos=True
    )


@pytest.fixture(scope="module")
def loaded() -> LoadedModel:
    return load_model(SHIPPED_CHECKPOINTS / "glmdsa-tiny", dtype=torch.float32)


def _prompts(vocab: int) -> dict[str, list[int]]:
    rng = random.Random(SEED)
    prompts = {}
    for i in range(TARGETS):
        prompts[f"t{i}"] = [rng.randrange(vocab) for _ in range(rng.randint(129, 230))]
    for i, length in enumerate((3, 40, 90, 300)):  # neighbours of other lengths
        prompts[f"o{i}"] = [rng.randrange(vocab) for _ in range(length)]
    return prompts


def _run(
    loaded: LoadedModel, prompts: dict[str, list[int]], names: list[str], **config: int
) -> dict[str, tuple[list[int], list[float]]]:
    engine_config = EngineConfig(
        max_total_tokens=8192, integrity="off", enable_prefix_cache=False, **config
    )
    engine = LLMEngine(loaded.model, kv_layout_for(loaded.config), engine_config)
    for name in names:
        engine.add_request(name, prompts[name], sampling=_params(name))
    outputs: dict[str, list[RequestOutput]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            assert out.error is None, out.error
            outputs.setdefault(out.request_id, []).append(out)
    return {
        name: (
            [t for o in outs for t in o.new_token_ids],
            [lp.logprob for o in outs for lp in o.logprobs],
        )
        for name, outs in outputs.items()
    }


def test_dsa_float32_tokens_are_the_same_alone_batched_and_chunked(loaded: LoadedModel) -> None:
    prompts = _prompts(loaded.config.vocab_size)
    targets = [name for name in prompts if name.startswith("t")]
    everyone = list(prompts)
    alone = {name: _run(loaded, prompts, [name])[name] for name in targets}
    assert all(len(tokens) == STEPS for tokens, _ in alone.values())
    variants = {
        "batched": _run(loaded, prompts, everyone, max_num_batched_tokens=4096),
        "chunked": _run(loaded, prompts, everyone, max_num_batched_tokens=64),
    }
    for label, got in variants.items():
        for name in targets:
            tokens, logprobs = got[name]
            assert tokens == alone[name][0], f"{label}: {name}"
            drift = max(abs(a - b) for a, b in zip(logprobs, alone[name][1], strict=True))
            assert drift < 1e-4, f"{label}: {name} logprobs moved by {drift}"
