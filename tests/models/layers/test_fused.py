"""Joined projections (``layers/fused.py``) against the separate ``nn.Linear`` calls they replace,
on fresh random weights and inputs: GQA's q/k/v (with its q/k norm and partial rotary) and the
SwiGLU block's gate/up."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.layers.gqa import GQAttention
from ember.models.layers.mlp import MLP
from ember.models.loader import load_model, save_checkpoint
from ember.models.quant import QuantConfig, quantize_model
from tests.models import tiny


def _model(dtype: torch.dtype, seed: int, **overrides: object) -> nn.Module:
    config = parse_config(tiny.glm4(**overrides), source="test")
    model = build_model(config, dtype=torch.float32).eval()
    tiny.randomize_(model, seed=seed)
    return model.to(dtype)


def _attention(model: nn.Module) -> GQAttention:
    attention = model.model.layers[1].self_attn
    assert isinstance(attention, GQAttention)
    return attention


def _assert_same(got: torch.Tensor, want: torch.Tensor, message: str = "") -> None:
    """Equal up to the matmul's accumulation order: a joined matmul may block its sums
    differently from three small ones (float32 with few tokens does); everything after the
    matmul repeats the separate path's float operations in the same order."""
    scale = float(want.abs().max()) or 1.0
    if want.dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6 * scale, msg=message or None)
    else:  # one bf16 rounding step of a product of the projection
        torch.testing.assert_close(got, want, rtol=2**-7, atol=2**-7 * scale, msg=message or None)


def _rotary(model: nn.Module, tokens: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    positions = torch.randint(0, 500, (tokens,))
    cos, sin = model.rotary(positions)
    return cos.to(dtype), sin.to(dtype)


@pytest.mark.parametrize("qk_norm", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 7, 64])
def test_joined_qkv_projection_equals_the_separate_one(
    qk_norm: bool, dtype: torch.dtype, tokens: int
) -> None:
    seed = int(torch.randint(0, 2**31, ()))
    model = _model(dtype, seed, use_qk_norm=qk_norm)
    attention = _attention(model)
    x = torch.randn(tokens, model.config.hidden_size).to(dtype)
    cos, sin = _rotary(model, tokens, dtype)
    with torch.inference_mode():
        want = attention._project(x, cos, sin)
        got = attention._project_joined(x, cos, sin)
        again = attention._project_joined(x, cos, sin)  # joined weights reused
    assert attention._qkv._joined is not None, "the joined path did not run"
    for name, w, g, a in zip("qkv", want, got, again, strict=True):
        _assert_same(g, w, f"{name} (seed {seed})")
        assert torch.equal(a, g), f"{name}: the second call differs (seed {seed})"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_joined_gate_up_equals_the_separate_calls(dtype: torch.dtype) -> None:
    torch.manual_seed(int(torch.randint(0, 2**31, ())))
    mlp = MLP(32, 48)
    for param in mlp.parameters():
        nn.init.normal_(param, std=0.2)
    mlp = mlp.to(dtype)
    x = torch.randn(9, 32).to(dtype)
    with torch.no_grad():
        want = mlp.forward_reference(x)
        got = mlp(x)
    assert mlp._gate_up._joined is not None
    _assert_same(got, want)


def test_joined_weights_are_the_modules_own_and_follow_changes() -> None:
    model = _model(torch.float32, 3)
    attention = _attention(model)
    x = torch.randn(5, model.config.hidden_size)
    cos, sin = _rotary(model, 5, torch.float32)
    names = sorted(model.state_dict())
    with torch.no_grad():
        attention._project_joined(x, cos, sin)
        joined = attention._qkv._joined
        assert joined is not None
        # No second copy: q_proj's weight is the first rows of the joined tensor.
        assert attention.q_proj.weight.data_ptr() == joined.weight.data_ptr()
        assert sorted(model.state_dict()) == names
        # An in-place load writes through to the joined rows.
        attention.k_proj.weight.copy_(torch.randn_like(attention.k_proj.weight))
        for w, g in zip(
            attention._project(x, cos, sin), attention._project_joined(x, cos, sin), strict=True
        ):
            _assert_same(g, w)
        # A cast replaces every weight: noticed, joined again.
        model.to(torch.bfloat16)
        xb, cb, sb = x.bfloat16(), cos.bfloat16(), sin.bfloat16()
        for w, g in zip(
            attention._project(xb, cb, sb), attention._project_joined(xb, cb, sb), strict=True
        ):
            _assert_same(g, w)
        assert attention._qkv._joined is not joined


def test_quantized_projections_are_not_joined() -> None:
    model = _model(torch.float32, 4)
    attention = _attention(model)
    x = torch.randn(6, model.config.hidden_size)
    cos, sin = _rotary(model, 6, torch.float32)
    with torch.no_grad():
        attention._project_joined(x, cos, sin)  # joined first, then quantized: must notice
        quantize_model(model, QuantConfig(scheme="int4", targets="all", group_size=32))
        got = attention._project_joined(x, cos, sin)
        want = attention._project(x, cos, sin)
    assert attention._qkv._joined is None
    for w, g in zip(want, got, strict=True):
        assert torch.equal(g, w)


def test_training_takes_the_separate_path_and_gradients_reach_each_projection() -> None:
    model = _model(torch.float32, 5)
    attention = _attention(model)
    mlp = model.model.layers[0].mlp
    x = torch.randn(4, model.config.hidden_size)
    cos, sin = _rotary(model, 4, torch.float32)
    with torch.no_grad():  # joined first: training afterwards sees ordinary parameters
        attention._project_joined(x, cos, sin)
        mlp(x)
    q, k, v = attention._project_joined(x, cos, sin)
    (q.square().sum() + k.square().sum() + v.square().sum() + mlp(x).square().sum()).backward()
    for linear in (attention.q_proj, attention.k_proj, attention.v_proj, mlp.gate_proj):
        assert linear.weight.grad is not None and bool(linear.weight.grad.abs().sum() > 0)


def test_checkpoint_of_joined_projections_round_trips(tmp_path: Path) -> None:
    model = _model(torch.float32, 6)
    ids = torch.randint(0, model.config.vocab_size, (1, 9))
    x = torch.randn(3, model.config.hidden_size)
    cos, sin = _rotary(model, 3, torch.float32)
    with torch.no_grad():
        want = model.reference_forward(ids)
        for layer in model.model.layers:
            layer.self_attn._project_joined(x, cos, sin)  # join every layer's q/k/v
    save_checkpoint(model, tmp_path)
    loaded = load_model(tmp_path, dtype=torch.float32).model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.reference_forward(ids), want)
