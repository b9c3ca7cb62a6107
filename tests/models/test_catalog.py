"""Workers AI ids -> shipped checkpoints, with overrides pointing ids at real directories."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from ember.errors import CheckpointError, ConfigError, ModelNotFound
from ember.models.arch import build_model
from ember.models.catalog import (
    SHIPPED,
    Catalog,
    CheckpointNotBuilt,
    ModelOptions,
    ModelOverride,
    default_catalog,
    with_overrides,
)
from ember.models.config import DEEPSEEK_V3, GLM4_MOE, GLM_MOE_DSA
from ember.models.config_parse import parse_config
from ember.models.loader import save_checkpoint
from tests.models import tiny

WINDOWS = {
    "@cf/moonshotai/kimi-k2.5": (DEEPSEEK_V3, "kimi-tiny", 256_000),
    "@cf/moonshotai/kimi-k2.6": (DEEPSEEK_V3, "kimi-tiny", 262_144),
    "@cf/moonshotai/kimi-k2.7-code": (DEEPSEEK_V3, "kimi-tiny", 262_144),
    "@cf/zai-org/glm-4.7-flash": (GLM4_MOE, "glm4moe-tiny", 131_072),
    "@cf/zai-org/glm-5.2": (GLM_MOE_DSA, "glmdsa-tiny", 262_144),
    "@cf/zai-org/glm-5.3": (GLM_MOE_DSA, "glmdsa-tiny", 1_310_720),
    "@cf/zai-org/glm-5.3-flash": (GLM_MOE_DSA, "glmdsa-tiny", 1_310_720),
}


def test_every_workers_ai_id_maps_to_its_family_checkpoint() -> None:
    catalog = default_catalog()
    assert sorted(catalog.ids()) == sorted(WINDOWS)
    for entry in catalog:
        architecture, shipped, window = WINDOWS[entry.model_id]
        assert (entry.architecture, entry.shipped, entry.context_window) == (
            architecture,
            shipped,
            window,
        )
        assert SHIPPED[shipped] == architecture
        assert entry.checkpoint_dir.name == shipped


def test_unknown_id_lists_the_known_ones() -> None:
    with pytest.raises(ModelNotFound) as info:
        default_catalog().get("@cf/meta/llama-3-8b")
    assert "@cf/meta/llama-3-8b" in str(info.value)
    assert "@cf/zai-org/glm-5.2" in str(info.value)


def test_a_shipped_checkpoint_that_is_not_built_says_so(tmp_path: Path) -> None:
    entry = default_catalog().get("@cf/zai-org/glm-5.3")
    assert entry.is_built  # every shipped checkpoint is in the package
    missing = dataclasses.replace(entry, checkpoint_dir=tmp_path / "glmdsa-tiny")
    with pytest.raises(CheckpointNotBuilt, match="'glmdsa-tiny', which is not built yet"):
        Catalog([missing]).resolve(entry.model_id)


def test_overrides_point_ids_at_real_checkpoints(tmp_path: Path) -> None:
    model = build_model(parse_config(tiny.glm4(max_position_embeddings=300)))
    save_checkpoint(model, tmp_path)
    options = ModelOptions(dtype="bfloat16", kv_cache_dtype="fp8_e4m3")
    catalog = with_overrides(
        {
            "@cf/moonshotai/kimi-k2.5": str(tmp_path),  # a known id, any architecture
            "@local/my-glm": ModelOverride(tmp_path, context_window=200, options=options),
        }
    )
    kimi = catalog.resolve("@cf/moonshotai/kimi-k2.5")
    assert kimi.entry.architecture == GLM4_MOE and kimi.entry.shipped is None
    assert kimi.entry.context_window == 256_000
    assert kimi.max_context == 300  # capped by the checkpoint
    mine = catalog.resolve("@local/my-glm")
    assert (mine.entry.family, mine.entry.context_window, mine.max_context) == ("glm", 200, 200)
    assert mine.entry.options == options
    assert len(catalog) == len(WINDOWS) + 1


def test_override_errors_name_the_model(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="model '@cf/zai-org/glm-5.2'.*does not exist"):
        with_overrides({"@cf/zai-org/glm-5.2": tmp_path / "missing"})
    (tmp_path / "config.json").write_text('{"architectures": ["GPT2LMHeadModel"]}')
    with pytest.raises(ConfigError) as info:
        with_overrides({"@cf/zai-org/glm-5.2": tmp_path})
    assert info.value.key == "architectures" and "@cf/zai-org/glm-5.2" in str(info.value)


def test_the_catalog_does_not_import_torch() -> None:
    """The runtime lists and validates models without loading the engine."""
    code = (
        "import sys\n"
        "from ember.models.catalog import default_catalog, reference_configs\n"
        "from ember.models.config_parse import load_config\n"
        "default_catalog(); [load_config(p) for p in reference_configs().values()]\n"
        "assert 'torch' not in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
