"""An assets directory that is (or holds) the project: its secrets, VCS data, dependencies and
ember's state are never assets, a Pages ``_worker.js`` is refused as wrangler refuses it, and the
project's config file or main module published as an asset is warned about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.bindings.assets.files import (
    AssetDirectory,
    ManifestAssets,
    build_manifest,
    check_limits,
)
from ember.config import load_project
from ember.errors import ConfigError
from ember.runtime.project_check import check_project

NEVER = (
    ".dev.vars",
    ".dev.vars.staging",
    ".env",
    ".env.local",
    "sub/.env",
    ".ember/state.db",
    ".git/config",
    "node_modules/lib/index.js",
    "sub/node_modules/x.js",
)


def _tree(root: Path, names: tuple[str, ...]) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)


def test_secrets_and_project_state_are_never_assets(tmp_path: Path) -> None:
    _tree(tmp_path, (*NEVER, "index.html", "sub/page.html"))
    # Not even when .assetsignore asks for them back.
    (tmp_path / ".assetsignore").write_text("!.dev.vars\n!.env\n!node_modules/\n")
    paths = [entry.path for entry in build_manifest(tmp_path)]
    assert paths == ["/index.html", "/sub/page.html"]
    site = AssetDirectory(tmp_path)
    for name in NEVER:
        assert site.lookup("/" + name) is None, name
    assert site.lookup("/index.html") is not None


@pytest.mark.parametrize("name", ["_worker.js", "_worker.js/index.js"])
def test_a_pages_worker_js_is_refused_unless_ignored(tmp_path: Path, name: str) -> None:
    _tree(tmp_path, (name, "index.html"))
    with pytest.raises(ConfigError, match=r"_worker\.js.*\.assetsignore"):
        check_limits(tmp_path)
    (tmp_path / ".assetsignore").write_text("_worker.js\n")
    assert [e.path for e in build_manifest(tmp_path)] == ["/index.html"]


def _project(root: Path, assetsignore: str | None = None) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "entry.py").write_text("x = 1\n")
    config = {"name": "site", "main": "src/entry.py", "assets": {"directory": "."}}
    (root / "wrangler.jsonc").write_text(json.dumps(config))
    if assetsignore is not None:
        (root / ".assetsignore").write_text(assetsignore)
    return root


def test_an_assets_directory_holding_the_config_and_main_is_warned_about(tmp_path: Path) -> None:
    warnings = check_project(load_project(_project(tmp_path / "a"))).warnings
    exposed = [w for w in warnings if "as static assets" in w]
    assert len(exposed) == 1, warnings
    assert "wrangler.jsonc" in exposed[0] and "src/entry.py" in exposed[0]
    assert "public/" in exposed[0] and ".assetsignore" in exposed[0]
    quiet = load_project(_project(tmp_path / "b", "wrangler.jsonc\nsrc/\n"))
    assert not [w for w in check_project(quiet).warnings if "as static assets" in w]


@pytest.mark.parametrize("name", ["_headers", "_redirects", ".assetsignore"])
def test_a_manifest_never_serves_the_files_that_configure_assets(tmp_path: Path, name: str) -> None:
    """A client other than wrangler may name them in its manifest: ember serve still never
    serves them, as README says (below the top they are ordinary files)."""
    for path in (name, f"sub/{name}"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    entry = {"hash": "a" * 32, "size": 1}
    site = ManifestAssets({f"/{name}": entry, f"/sub/{name}": entry}, tmp_path)
    assert site.lookup(f"/{name}") is None
    assert site.lookup(f"/sub/{name}") is not None
