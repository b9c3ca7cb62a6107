"""What ``ember deploy`` uploads of a project: its modules and data, never its config."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.cli.worker_project import load_project
from ember.config import load_project as load_dev_project
from ember.errors import ConfigError

WORKER = """\
from workers import Response


async def on_fetch(request, env):
    return Response("hi")
"""


@pytest.mark.parametrize(
    ("config_name", "config_text"),
    [
        ("ember.yaml", 'name: w\nmain: worker.py\ncompatibility_date: "2026-11-01"\n'),
        ("wrangler.toml", 'name = "w"\nmain = "worker.py"\ncompatibility_date = "2026-11-01"\n'),
    ],
)
def test_the_upload_has_the_modules_and_data_but_not_the_config(
    tmp_path: Path, config_name: str, config_text: str
) -> None:
    (tmp_path / config_name).write_text(config_text)
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "page.html").write_text("<p>hi</p>")
    (tmp_path / "data.yaml").write_text("a: 1\n")  # a data file, not the config
    (tmp_path / ".dev.vars").write_text("SECRET=s\n")
    names = [part.name for part in load_project(tmp_path).modules()]
    assert names == ["worker.py", "data.yaml", "helpers.py", "templates/page.html"]


def test_deploy_reads_the_same_config_file_and_syntax_as_dev(tmp_path: Path) -> None:
    """``ember deploy`` and ``ember dev`` pick the same file when several exist (wrangler.jsonc
    before wrangler.json) and read it with the same parser (JSONC: comments, trailing commas)."""
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "wrangler.json").write_text('{"name": "from-json", "main": "worker.py"}')
    (tmp_path / "wrangler.jsonc").write_text(
        '{\n  // the one dev reads\n  "name": "from-jsonc",\n  "main": "worker.py",\n'
        '  "vars": {"A": "1",},\n}\n'
    )
    assert load_dev_project(tmp_path).name == "from-jsonc"
    project = load_project(tmp_path)
    assert (project.name, project.config_file.name) == ("from-jsonc", "wrangler.jsonc")
    assert project.vars == {"A": "1"}


def test_deploy_names_an_unreadable_config_as_dev_does(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "wrangler.jsonc").write_bytes(b'{"name": "w\xff"}')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_project(tmp_path)
