"""The ``ai`` config section, read by the runtime's config loader: wrangler's form, ember's pool
settings, and errors naming the file and key before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.bindings.ai.spec import config_of
from ember.errors import ConfigError
from ember.runtime.deployment import load_deployment

WORKER = "async def on_fetch(request, env):\n    pass\n"


def _project(root: Path, name: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)
    (root / "worker.py").write_text(WORKER)
    return root


def test_wrangler_toml_ai_binding(tmp_path: Path) -> None:
    root = _project(
        tmp_path, "wrangler.toml", 'name = "w"\nmain = "worker.py"\n[ai]\nbinding = "AI"\n'
    )
    (spec,) = load_deployment(root).bindings
    assert (spec.kind, spec.name, spec.client) == ("ai", "AI", "ember.bindings.ai.client:Ai")
    assert config_of(spec).pool.models == {}


def test_pool_settings_travel_to_the_service(tmp_path: Path) -> None:
    text = (
        "name: w\nai:\n  binding: AI\n  models:\n    '@cf/zai-org/glm-4.7-flash':\n"
        "      replicas: 2\n      checkpoint: ckpt\n  limits:\n    requests_per_minute: 60\n"
    )
    (spec,) = load_deployment(_project(tmp_path, "ember.yaml", text)).bindings
    config = config_of(spec)
    serving = config.pool.serving("@cf/zai-org/glm-4.7-flash")
    assert len(serving.replicas) == 2 and serving.checkpoint == tmp_path / "ckpt"
    assert config.limits.requests_per_minute == 60


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("  binding: AI\n  models:\n    '@cf/x':\n      device: tpu\n", 'ai.models."@cf/x".device'),
        ("  binding: AI\n  colour: red\n", "ai.colour"),
        ("  binding: 3\n", "ai.binding"),
        ("  binding: AI\n  limits:\n    requests_per_minute: 0\n", "ai.limits.requests_per_minute"),
    ],
)
def test_errors_name_file_and_key(tmp_path: Path, section: str, key: str) -> None:
    root = _project(tmp_path, "ember.yaml", "name: w\nai:\n" + section)
    with pytest.raises(ConfigError) as caught:
        load_deployment(root)
    assert caught.value.key == key and caught.value.file.endswith("ember.yaml")
