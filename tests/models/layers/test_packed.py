"""The prepacked lm_head (``layers/packed.py``) against the plain ``nn.Linear`` it replaces, on
fresh random weights and inputs: bit-identical BF16 outputs, an exact plain weight for
checkpoints, repacking on loads, and the engine's logits and tokens unchanged."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from ember.models.kv.spec import kv_layout_for
from ember.models.layers.packed import PackedLinear, bf16_packing_supported, can_pack
from ember.models.loader import load_model, save_checkpoint
from tests.models import tiny

pytestmark = pytest.mark.skipif(
    not bf16_packing_supported(), reason="oneDNN has no BF16 kernels here (test_packed_fallback)"
)


def _linear(rows: int, cols: int, bias: bool) -> nn.Linear:
    linear = nn.Linear(cols, rows, bias=bias)
    for param in linear.parameters():
        nn.init.normal_(param, std=0.5)
    return linear.to(torch.bfloat16)


def _model(seed: int, **overrides: object) -> nn.Module:
    config = parse_config(tiny.glm4(**overrides), source="test")
    model = build_model(config, dtype=torch.float32).eval()
    tiny.randomize_(model, seed=seed)
    return model.to(torch.bfloat16)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1,), (7,), (64,), (3, 5)])
def test_packed_linear_equals_the_plain_one(bias: bool, shape: tuple[int, ...]) -> None:
    torch.manual_seed(int(torch.randint(0, 2**31, ())))
    plain = _linear(1000, 96, bias)
    packed = PackedLinear.of(plain)
    x = torch.randn(*shape, 96).to(torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(packed(x), plain(x))
    assert torch.equal(packed.weight, plain.weight)  # unpacked exactly
    assert torch.equal(packed.unpacked()(x), plain(x))
    state = packed.state_dict()
    assert set(state) == set(plain.state_dict())
    assert all(torch.equal(state[k], v) for k, v in plain.state_dict().items())


def test_deepcopy_and_torch_save_carry_the_exact_weight(tmp_path: Path) -> None:
    torch.manual_seed(int(torch.randint(0, 2**31, ())))
    plain = _linear(200, 48, True)
    packed = PackedLinear.of(plain)
    torch.save(packed, tmp_path / "head.pt")
    copies = [copy.deepcopy(packed), torch.load(tmp_path / "head.pt", weights_only=False)]
    x = torch.randn(5, 48).to(torch.bfloat16)
    with torch.inference_mode():
        for other in copies:
            assert torch.equal(other(x), plain(x))


def test_a_load_repacks_and_grad_takes_the_plain_path() -> None:
    torch.manual_seed(int(torch.randint(0, 2**31, ())))
    packed = PackedLinear.of(_linear(300, 64, False))
    other = _linear(300, 64, False)
    packed.load_state_dict(other.state_dict())
    x = torch.randn(9, 64).to(torch.bfloat16)
    with torch.no_grad():
        assert torch.equal(packed(x), other(x))
    x.requires_grad_(True)
    packed(x).float().sum().backward()  # no opaque weight on the autograd path
    assert x.grad is not None


def test_only_an_untied_bf16_plain_lm_head_is_packed() -> None:
    assert not can_pack(_linear(8, 8, False).float())
    assert not _model(1, tie_word_embeddings=True).pack_lm_head()
    model = _model(1)
    assert model.to(torch.float32).pack_lm_head() is False
    model = _model(1)
    assert model.pack_lm_head() and isinstance(model.lm_head, PackedLinear)
    model.unpack_lm_head()
    assert type(model.lm_head) is nn.Linear


def test_packed_model_logits_checkpoint_and_engine_tokens_are_unchanged(tmp_path: Path) -> None:
    seed = int(torch.randint(0, 2**31, ()))
    plain, packed = _model(seed), _model(seed)
    assert packed.pack_lm_head()
    ids = torch.randint(0, plain.config.vocab_size, (2, 11))
    with torch.inference_mode():
        assert torch.equal(packed.reference_forward(ids), plain.reference_forward(ids))
    save_checkpoint(packed, tmp_path)
    loaded = load_model(tmp_path, dtype=torch.bfloat16).model
    assert torch.equal(loaded.lm_head.weight, plain.lm_head.weight), f"seed {seed}"

    prompts = [torch.randint(0, plain.config.vocab_size, (n,)).tolist() for n in (5, 17, 30)]
    got = {}
    for pack in (True, False):
        model = _model(seed)
        config = EngineConfig(max_total_tokens=256, page_size=4, pack_lm_head=pack)
        engine = LLMEngine(model, kv_layout_for(model.config), config)
        assert isinstance(model.lm_head, PackedLinear) == pack
        got[pack] = engine.generate(prompts, StopCriteria(max_tokens=8, ignore_eos=True))
    assert got[True] == got[False], f"seed {seed}"
