"""transformers is the correctness oracle: same checkpoint, same logits (float32, rel. err < 1e-4).

Each case builds a tiny random config with a fresh seed, saves it with transformers' own
``*ForCausalLM`` and loads the directory with ember (and the other way round), then compares the
logits on fresh random token ids. The failing seed is in the assertion message.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.loader import load_model, save_checkpoint
from tests.models import tiny

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.oracle

TOLERANCE = 1e-4
_HF_CLASSES = {
    "DeepseekV3ForCausalLM": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "Glm4MoeForCausalLM": ("Glm4MoeConfig", "Glm4MoeForCausalLM"),
    "GlmMoeDsaForCausalLM": ("GlmMoeDsaConfig", "GlmMoeDsaForCausalLM"),
}
_YARN_UNEQUAL_MSCALE = tiny.YARN | {"mscale": 0.707, "mscale_all_dim": 1.0, "factor": 16.0}

CASES: dict[str, dict[str, Any]] = {
    # Kimi K2 shape: YaRN (mscale == mscale_all_dim), 2 groups keep 1, 1 dense layer.
    "kimi-yarn-grouped": tiny.kimi(),
    # DeepSeek without q LoRA, half-split rotary, YaRN with a cos/sin attention factor != 1,
    # 4 groups keep 2, two dense layers, biased projections.
    "deepseek-variant": tiny.kimi(
        q_lora_rank=None,
        rope_interleave=False,
        rope_parameters=_YARN_UNEQUAL_MSCALE,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=2,
        num_hidden_layers=4,
        attention_bias=True,
        max_position_embeddings=1024,  # = original 64 x factor 16
    ),
    # GLM-4.7 shape: partial rotary 0.5, q/k norm, q/k/v bias.
    "glm4-qknorm-bias": tiny.glm4(),
    # No q/k norm, rotary on a quarter of each head, YaRN, grouped routing, tied embeddings.
    "glm4-variant": tiny.glm4(
        use_qk_norm=False,
        rope_parameters=tiny.YARN | {"partial_rotary_factor": 0.25},
        n_group=2,
        topk_group=2,
        tie_word_embeddings=True,
    ),
    # GLM-5 shape: the indexer keeps 4 of 12 tokens; layer 1 reuses layer 0's selection.
    "glmdsa-sparse-shared": tiny.glmdsa(),
    # Two shared layers in a row after a full one, YaRN, no dense layer at all.
    "glmdsa-variant": tiny.glmdsa(
        num_hidden_layers=4,
        indexer_types=["full", "shared", "shared", "full"],
        index_topk=5,
        first_k_dense_replace=0,
        rope_parameters=tiny.YARN,
    ),
}


def _hf_model(raw: dict[str, Any], seed: int) -> torch.nn.Module:
    config_name, model_name = _HF_CLASSES[raw["architectures"][0]]
    kwargs = {k: v for k, v in raw.items() if k != "model_type"}
    config = getattr(transformers, config_name)(**kwargs, attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    tiny.randomize_(model, seed)
    return model


def _hf_logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids).logits


@pytest.mark.parametrize("case", sorted(CASES))
@torch.no_grad()
def test_ember_loads_a_transformers_checkpoint_and_matches_its_logits(
    case: str, tmp_path: Path
) -> None:
    seed = random.randrange(2**31)
    hf = _hf_model(CASES[case], seed)
    hf.save_pretrained(tmp_path)
    ours = load_model(tmp_path).model
    ids = torch.randint(
        0, hf.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(seed)
    )
    error = tiny.relative_error(ours.reference_forward(ids), _hf_logits(hf, ids))
    assert error < TOLERANCE, f"{case} seed {seed}: relative error {error}"


@pytest.mark.parametrize("case", sorted(CASES))
@torch.no_grad()
def test_transformers_loads_an_ember_checkpoint_and_matches_its_logits(
    case: str, tmp_path: Path
) -> None:
    seed = random.randrange(2**31)
    ours = build_model(parse_config(CASES[case]))
    tiny.randomize_(ours, seed)
    save_checkpoint(ours, tmp_path, max_shard_bytes=200_000)  # sharded, with an index
    assert (tmp_path / "model.safetensors.index.json").is_file()
    _, model_name = _HF_CLASSES[CASES[case]["architectures"][0]]
    hf = getattr(transformers, model_name).from_pretrained(tmp_path, attn_implementation="eager")
    ids = torch.randint(
        0, ours.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(seed)
    )
    error = tiny.relative_error(ours.reference_forward(ids), _hf_logits(hf.eval(), ids))
    assert error < TOLERANCE, f"{case} seed {seed}: relative error {error}"


@torch.no_grad()
def test_sparse_selection_changes_the_logits(tmp_path: Path) -> None:
    """The DSA cases would not notice a broken indexer if selection did not matter: it does."""
    seed = random.randrange(2**31)
    _hf_model(CASES["glmdsa-sparse-shared"], seed).save_pretrained(tmp_path)
    model = load_model(tmp_path).model
    ids = torch.randint(0, model.config.vocab_size, (2, 12))
    sparse = model.reference_forward(ids)
    for layer in model.model.layers:
        if layer.self_attn.indexer is not None:
            layer.self_attn.indexer.index_topk = 10**6
    assert tiny.relative_error(model.reference_forward(ids), sparse) > 1e-2, f"seed {seed}"
