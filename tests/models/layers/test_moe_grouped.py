"""The grouped MoE paths against the per-expert loop, on fresh random inputs and weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ember.models.arch import build_model
from ember.models.config import MoEConfig
from ember.models.config_parse import parse_config
from ember.models.layers import moe_grouped
from ember.models.layers.moe import MoE
from ember.models.loader import load_model, save_checkpoint
from ember.models.quant import QuantConfig, quantize_model
from tests.models import tiny


def _moe(seed: int, dtype: torch.dtype, experts: int = 16, k: int = 4, groups: int = 1) -> MoE:
    torch.manual_seed(seed)
    config = MoEConfig(
        n_routed_experts=experts,
        num_experts_per_tok=k,
        n_shared_experts=1,
        moe_intermediate_size=32,
        n_group=groups,
        topk_group=1 if groups > 1 else groups,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
    )
    moe = MoE(64, config)
    for param in moe.parameters():
        torch.nn.init.normal_(param, std=0.2)
    moe.gate.e_score_correction_bias.normal_(std=0.1)
    return moe.to(dtype).eval()


@pytest.mark.parametrize("strategy", ["padded", "sorted"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("tokens", [1, 7, 64, 300])
@pytest.mark.parametrize("seed", [0, 1])
def test_grouped_matches_per_expert_loop(
    strategy: str, dtype: torch.dtype, tokens: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    moe = _moe(seed, dtype, groups=4 if seed else 1)
    # Force one strategy whatever the cost rule would pick.
    monkeypatch.setattr(moe_grouped, "PADDED_MAX_MEAN_ROWS", 10**9 if strategy == "padded" else 0)
    x = torch.randn(2, tokens, 64).to(dtype)
    with torch.no_grad():
        want = moe.forward_reference(x)
        got = moe(x)
    assert moe._stacked is not None, "the grouped path did not run"
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    else:  # the loop rounds each expert's share to bf16 before adding; the grouped path doesn't
        scale = float(want.abs().max())
        torch.testing.assert_close(got, want, rtol=3e-2, atol=2e-2 * scale)


def test_sorted_fallback_without_grouped_mm(monkeypatch: pytest.MonkeyPatch) -> None:
    moe = _moe(3, torch.float32)
    monkeypatch.setattr(moe_grouped, "PADDED_MAX_MEAN_ROWS", 0)
    monkeypatch.delattr(torch, "_grouped_mm", raising=False)
    x = torch.randn(50, 64)
    with torch.no_grad():
        torch.testing.assert_close(moe(x), moe.forward_reference(x), rtol=1e-5, atol=1e-5)


def test_stacked_weights_are_the_experts_own_and_follow_changes() -> None:
    moe = _moe(4, torch.float32)
    x = torch.randn(20, 64)
    with torch.no_grad():
        moe(x)
        stacked = moe._stacked
        assert stacked is not None
        # No second copy: each expert's nn.Linear weight is a view of the stacked tensors.
        expert = moe.experts[5]
        assert expert.up_proj.weight.data_ptr() == stacked.gate_up[5, 32:].data_ptr()
        assert expert.down_proj.weight.data_ptr() == stacked.down[5].data_ptr()
        # An in-place load writes through the views.
        fresh = {k: torch.randn_like(v) for k, v in moe.state_dict().items()}
        moe.load_state_dict(fresh)
        torch.testing.assert_close(moe(x), moe.forward_reference(x), rtol=1e-4, atol=1e-4)
        # A cast re-points the weights: the next call restacks instead of using stale tensors.
        moe.to(torch.float64)
        x64 = x.double()
        torch.testing.assert_close(moe(x64), moe.forward_reference(x64))
        assert moe._stacked is not stacked and moe._stacked.down.dtype == torch.float64


def test_quantized_experts_take_the_reference_path() -> None:
    moe = _moe(5, torch.float32)
    x = torch.randn(20, 64)
    with torch.no_grad():
        moe(x)  # stacked first, then quantized: must notice
        quantize_model(moe, QuantConfig(scheme="int4", targets="all", group_size=32))
        got = moe(x)
        assert moe._stacked is None
        torch.testing.assert_close(got, moe.forward_reference(x))


def test_training_gradients_reach_every_chosen_expert() -> None:
    moe = _moe(6, torch.float32)
    x = torch.randn(30, 64)
    with torch.no_grad():
        moe(x)  # stack first: training afterwards must still see ordinary parameters
    moe.train()
    moe(x).square().sum().backward()
    grads = [e.gate_proj.weight.grad for e in moe.experts]
    assert sum(g is not None and bool(g.abs().sum() > 0) for g in grads) >= 8


def test_checkpoint_of_stacked_experts_round_trips(tmp_path: Path) -> None:

    config = parse_config(tiny.glm4(), source="test")
    model = build_model(config, dtype=torch.float32).eval()
    tiny.randomize_(model, seed=0)
    ids = torch.randint(0, config.vocab_size, (1, 9))
    with torch.no_grad():
        want = model.reference_forward(ids)  # stacks every MoE layer's experts
    save_checkpoint(model, tmp_path)
    loaded = load_model(tmp_path, dtype=torch.float32).model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.reference_forward(ids), want)
