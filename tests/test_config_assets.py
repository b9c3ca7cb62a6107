"""The ``assets`` key: each field checked, errors naming the key and the allowed values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.config import load_project
from ember.errors import ConfigError
from ember.runtime.deployment import deployment_from_project
from ember.runtime.project_check import check_project


def _project(tmp_path: Path, assets: object, *, main: bool = True, **extra: object) -> Path:
    (tmp_path / "public").mkdir(exist_ok=True)
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "entry.py").write_text("async def on_fetch(request, env):\n    pass\n")
    doc: dict[str, object] = {"name": "site", "assets": assets, **extra}
    if main:
        doc["main"] = "src/entry.py"
    (tmp_path / "wrangler.jsonc").write_text(json.dumps(doc))
    return tmp_path


def test_the_c3_template_config_reads(tmp_path: Path) -> None:
    config = load_project(_project(tmp_path, {"directory": "./public"}))
    assert config.assets is not None and config.assets.directory == tmp_path / "public"
    assert config.assets.html_handling == "auto-trailing-slash"
    assert config.assets.not_found_handling == "none" and config.assets.binding is None
    assert config.has_worker


def test_all_fields_and_the_binding(tmp_path: Path) -> None:
    assets = {
        "directory": "public",
        "binding": "ASSETS",
        "html_handling": "drop-trailing-slash",
        "not_found_handling": "single-page-application",
        "run_worker_first": ["/api/*", "!/api/docs/*"],
    }
    config = load_project(_project(tmp_path, assets))
    assert config.assets.worker_rules == ("/api/*",)
    assert config.assets.asset_rules == ("/api/docs/*",)
    specs = check_project(config).bindings
    assert [(s.kind, s.name) for s in specs] == [("assets", "ASSETS")]


def test_assets_only_needs_no_main_and_no_binding(tmp_path: Path) -> None:
    config = load_project(_project(tmp_path, {"directory": "public"}, main=False))
    assert not config.has_worker
    with pytest.raises(ConfigError) as caught:
        load_project(_project(tmp_path, {"directory": "public", "binding": "A"}, main=False))
    assert caught.value.key == "assets.binding"


@pytest.mark.parametrize(
    ("assets", "key", "expected"),
    [
        ("public", "assets", "directory"),
        ({}, "assets.directory", "assets directory"),
        ({"directory": "missing"}, "assets.directory", "existing directory"),
        ({"directory": "public", "binding": "my-assets"}, "assets.binding", "identifier"),
        ({"directory": "public", "colour": 1}, "assets.colour", "run_worker_first"),
        (
            {"directory": "public", "html_handling": "auto"},
            "assets.html_handling",
            "auto-trailing-slash, force-trailing-slash, drop-trailing-slash, none",
        ),
        (
            {"directory": "public", "not_found_handling": "spa"},
            "assets.not_found_handling",
            "none, 404-page, single-page-application",
        ),
        ({"directory": "public", "run_worker_first": "yes"}, "assets.run_worker_first", "true"),
        ({"directory": "public", "run_worker_first": []}, "assets.run_worker_first", "one rule"),
        ({"directory": "public", "run_worker_first": ["api/*"]}, "assets.run_worker_first", "'/'"),
        ({"directory": "public", "run_worker_first": ["!api"]}, "assets.run_worker_first", "!/"),
        ({"directory": "public", "run_worker_first": ["!/a/*"]}, "assets.run_worker_first", "not"),
        (
            {"directory": "public", "run_worker_first": ["/a/*", "/a/b"]},
            "assets.run_worker_first",
            "redundant",
        ),
        (
            {"directory": "public", "run_worker_first": ["/a", "/a"]},
            "assets.run_worker_first",
            "dup",
        ),
    ],
)
def test_bad_assets_name_the_key_and_what_is_allowed(
    tmp_path: Path, assets: object, key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_project(_project(tmp_path, assets))
    assert caught.value.key == key
    assert expected in str(caught.value)


def test_binding_name_clash_with_a_var(tmp_path: Path) -> None:
    config = load_project(
        _project(tmp_path, {"directory": "public", "binding": "A"}, vars={"A": "x"})
    )
    with pytest.raises(ConfigError) as caught:
        check_project(config)
    assert "A" in str(caught.value)


def test_an_asset_past_25_mib_is_refused_when_the_project_is_read_for_dev(tmp_path: Path) -> None:
    root = _project(tmp_path, {"directory": "public"})
    with (root / "public" / "video.bin").open("wb") as handle:
        handle.truncate(25 * 1024 * 1024 + 1)  # sparse: no 25 MiB written
    with pytest.raises(ConfigError) as caught:
        deployment_from_project(load_project(root))
    assert caught.value.key == "assets.directory" and "video.bin" in str(caught.value)
    (root / "public" / ".assetsignore").write_text("*.bin\n")
    assert deployment_from_project(load_project(root)).assets is not None
