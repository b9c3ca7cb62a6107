"""``ember deploy`` of a project with static assets beside its entry (``ember init``'s layout
plus ``assets: {directory: ./public, binding: ASSETS}``): the bindings table lists the assets
binding as wrangler's does, and the assets directory is not uploaded again as modules."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ember.cli.main import cli

CONFIG = """name: site
main: worker.py
compatibility_date: "2026-11-01"
vars:
  GREETING: Hello
assets:
  directory: ./public
  binding: ASSETS
"""


def _project(root: Path) -> Path:
    (root / "public" / "docs").mkdir(parents=True)
    (root / "templates").mkdir()
    (root / "ember.yaml").write_text(CONFIG)
    (root / "worker.py").write_text("from workers import Response\n")
    (root / "public" / "index.html").write_text("<h1>home</h1>")
    (root / "public" / "docs" / "a.html").write_text("<p>a</p>")
    (root / "public" / "robots.txt").write_text("User-agent: *")
    # A Text module by the default rules, outside the assets directory: still a module.
    (root / "templates" / "page.html").write_text("<p>{name}</p>")
    return root


def _deploy(root: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["deploy", str(root), "--dry-run", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_bindings_table_lists_the_assets_binding(tmp_path: Path) -> None:
    out = _deploy(_project(tmp_path))
    rows = out.splitlines()
    assert rows[rows.index("Your Worker has access to the following bindings:") + 1 :][:3] == [
        "Binding                     Resource",
        "env.ASSETS                  Assets",
        'env.GREETING ("Hello")      Environment Variable',
    ]


def test_the_assets_directory_is_not_uploaded_as_modules(tmp_path: Path) -> None:
    root = _project(tmp_path)
    summary = json.loads(_deploy(root, "--json"))
    assert summary["modules"] == ["worker.py", "templates/page.html"]
    _deploy(root, "--outdir", str(tmp_path / "dist"))
    written = sorted(
        p.relative_to(tmp_path / "dist").as_posix()
        for p in (tmp_path / "dist").rglob("*")
        if p.is_file()
    )
    assert written == ["README.md", "templates/page.html", "worker.py"]


def test_an_assets_directory_that_holds_the_entry_is_walked_for_modules(tmp_path: Path) -> None:
    """``base_dir: .``, ``main: app/worker.py``, ``assets.directory: ./app``: app/ holds the
    worker's code, so its ruled files are modules (as wrangler uploads them); leaving app/ out
    deployed a worker whose ``import app.util`` failed."""
    (tmp_path / "app").mkdir()
    (tmp_path / "ember.yaml").write_text(
        'name: site\nmain: app/worker.py\nbase_dir: .\ncompatibility_date: "2026-11-01"\n'
        "assets:\n  directory: ./app\n"
    )
    (tmp_path / "app" / "worker.py").write_text("from workers import Response\nimport app.util\n")
    (tmp_path / "app" / "util.py").write_text("X = 1\n")
    (tmp_path / "app" / "index.html").write_text("<h1>hi</h1>")
    (tmp_path / "app" / ".assetsignore").write_text("*.py\n")  # the code is no asset
    summary = json.loads(_deploy(tmp_path, "--json"))
    assert summary["modules"] == ["app/worker.py", "app/index.html", "app/util.py"]
