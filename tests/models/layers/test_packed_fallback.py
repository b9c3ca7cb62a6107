"""A BF16 model serves on a CPU whose oneDNN has no BF16 kernels (AVX2 only: no AVX512-BW/VL/DQ,
no AVX-NE-CONVERT): the lm_head stays a plain ``nn.Linear`` there instead of the engine failing
to start on oneDNN's reorder. Runs on every machine; where oneDNN has BF16 kernels the head is
packed, and the tokens match the plain head's either way."""

from __future__ import annotations

import torch
from torch import nn

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.spec import kv_layout_for
from ember.models.layers.packed import PackedLinear, bf16_packing_supported, can_pack
from tests.models import tiny


def _model(seed: int) -> nn.Module:
    config = parse_config(tiny.glm4(), source="test")
    model = build_model(config, dtype=torch.float32).eval()
    tiny.randomize_(model, seed=seed)
    return model.to(torch.bfloat16)


def test_can_pack_only_where_onednn_has_bf16_kernels() -> None:
    linear = nn.Linear(16, 32).to(torch.bfloat16)
    assert can_pack(linear) == bf16_packing_supported()


def test_a_bf16_engine_starts_and_decodes_with_or_without_bf16_kernels() -> None:
    seed = int(torch.randint(0, 2**31, ()))
    prompts = [torch.randint(0, 97, (n,)).tolist() for n in (5, 17)]  # tiny vocab: 97
    got = {}
    for pack in (True, False):
        model = _model(seed)
        config = EngineConfig(max_total_tokens=128, page_size=4, pack_lm_head=pack)
        engine = LLMEngine(model, kv_layout_for(model.config), config)
        packed = isinstance(model.lm_head, PackedLinear)
        assert packed == (pack and bf16_packing_supported())
        got[pack] = engine.generate(prompts, StopCriteria(max_tokens=4, ignore_eos=True))
    assert got[True] == got[False], f"seed {seed}"
