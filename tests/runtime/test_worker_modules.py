"""``stage_modules``: the directory ``ember dev`` runs a worker from holds exactly its modules,
kept in step with the project as files are edited, added, or stop being modules."""

from __future__ import annotations

import os
from pathlib import Path

from ember.config import load_project
from ember.runtime.worker_modules import collect_modules, stage_modules

RULE = '\n[[rules]]\ntype = "Text"\nglobs = ["**/*.md"]\nfallthrough = true\n'


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


def test_the_stage_follows_edits_new_rules_and_removed_files(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "templates").mkdir(parents=True)
    (project / "wrangler.toml").write_text('name = "w"\nmain = "worker.py"\n')
    (project / "worker.py").write_text("A = 1\n")
    (project / "templates" / "page.html").write_text("v1")
    (project / "notes.md").write_text("notes")
    stage = tmp_path / "stage"

    stage_modules(collect_modules(load_project(project)), stage)
    assert _files(stage) == {"worker.py": "A = 1\n", "templates/page.html": "v1"}

    (project / "templates" / "page.html").write_text("v2, longer")
    (project / "wrangler.toml").write_text('name = "w"\nmain = "worker.py"\n' + RULE)
    stage_modules(collect_modules(load_project(project)), stage)
    assert _files(stage) == {
        "worker.py": "A = 1\n", "templates/page.html": "v2, longer", "notes.md": "notes"
    }  # fmt: skip

    # An edit that keeps the size shows by its mtime; a file gone leaves no folder behind.
    (project / "worker.py").write_text("A = 2\n")
    os.utime(project / "worker.py", ns=(1, 1))
    (project / "templates" / "page.html").unlink()
    stage_modules(collect_modules(load_project(project)), stage)
    assert _files(stage) == {"worker.py": "A = 2\n", "notes.md": "notes"}
    assert not (stage / "templates").exists()


def test_a_link_that_loops_or_dangles_is_no_module(tmp_path: Path) -> None:
    """``ln -s loop.py loop.py`` matches the ``**/*.py`` rule but is no file: it is skipped, as
    before names were resolved (then ``ember deploy`` failed with a traceback and ``ember dev``
    answered 500)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "ember.yaml").write_text("name: w\nmain: worker.py\n")
    (project / "worker.py").write_text("A = 1\n")
    os.symlink("loop.py", project / "loop.py")
    os.symlink("nowhere.py", project / "gone.py")
    assert [m.name for m in collect_modules(load_project(project))] == ["worker.py"]


def test_an_assets_only_project_has_no_modules(tmp_path: Path) -> None:
    project = tmp_path / "site"
    (project / "public").mkdir(parents=True)
    (project / "ember.yaml").write_text("name: site\nassets:\n  directory: public\n")
    (project / "public" / "index.html").write_text("hi")
    (project / "notes.py").write_text("x = 1\n")
    assert collect_modules(load_project(project)) == ()
