"""``ember models list`` and ``ember models inspect``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ember.cli.main import cli
from ember.models.arch import build_model
from ember.models.config_parse import parse_config
from ember.models.loader import save_checkpoint
from tests.models import tiny

ROOT = Path(__file__).resolve().parents[2]


def test_list_shows_every_id_and_the_config_only_entries() -> None:
    result = CliRunner().invoke(cli, ["models", "list", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    assert len(listing["models"]) == 7
    assert {"kimi-k2", "kimi-k2.5", "glm-4.7", "glm-5.2"} <= set(listing["config_only"])


def test_inspect_full_size_config_by_name() -> None:
    result = CliRunner().invoke(cli, ["models", "inspect", "kimi-k2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kv_bytes_per_token"]["bf16"]["total"] == 70_272
    assert report["kv_bytes_per_token"]["fp8"]["total"] == 35_136
    text = CliRunner().invoke(cli, ["models", "inspect", "glm-5.2", "--int4-group-size", "128"])
    assert text.exit_code == 0, text.output
    assert "89,856" in text.output and "group 128" in text.output


def test_inspect_a_checkpoint_directory(tmp_path: Path) -> None:
    save_checkpoint(build_model(parse_config(tiny.glmdsa())), tmp_path)
    result = CliRunner().invoke(cli, ["models", "inspect", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["architecture"] == "GlmMoeDsaForCausalLM"


def test_unknown_target_is_a_user_error() -> None:
    env = {"PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "ember", "models", "inspect", "@cf/nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 1
    assert "ember: error: '@cf/nope' is no catalog id" in result.stderr
    assert "kimi-k2.5" in result.stderr
