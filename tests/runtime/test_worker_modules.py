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


def test_a_linked_folder_is_walked_as_a_folder_and_a_link_back_up_is_not(tmp_path: Path) -> None:
    """``ext -> ../outside/ext``: its files are modules under the link's name (they were never
    walked, so ``import ext`` failed in dev with a pip-install hint and a deploy left it out).
    A link into a folder it sits in (``up -> ..``, ``self -> .``) would be walked forever."""
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (tmp_path / "outside" / "ext").mkdir(parents=True)
    (tmp_path / "outside" / "ext" / "mod.py").write_text("WORD = 1\n")
    (tmp_path / "outside" / "ext" / "notes.md").write_text("no rule picks me")
    (project / "ember.yaml").write_text("name: w\nmain: worker.py\n")
    (project / "worker.py").write_text("import ext.mod\n")
    (project / "pkg" / "util.py").write_text("X = 1\n")
    os.symlink("../outside/ext", project / "ext")
    os.symlink("../outside/ext", project / "ext2")  # a second name for it: both import
    os.symlink("..", project / "pkg" / "up")
    os.symlink(".", project / "pkg" / "self")
    os.symlink("../../project", tmp_path / "outside" / "ext" / "back")
    modules = collect_modules(load_project(project))
    assert [m.name for m in modules] == [
        "worker.py", "ext/mod.py", "ext2/mod.py", "pkg/util.py"
    ]  # fmt: skip
    assert modules[1].path.read_text() == "WORD = 1\n"
    stage = tmp_path / "stage"
    stage_modules(modules, stage)
    assert _files(stage)["ext/mod.py"] == "WORD = 1\n"


def test_a_same_size_edit_that_keeps_the_mtime_is_staged(tmp_path: Path) -> None:
    """``touch -r`` / ``rsync -t``, or two saves in one tick: size and mtime as they were. The
    stage compared only those, so dev went on running the old copy after the watcher saw it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "ember.yaml").write_text("name: w\nmain: worker.py\n")
    worker = project / "worker.py"
    worker.write_text("A = 1\n")
    stage = tmp_path / "stage"
    stage_modules(collect_modules(load_project(project)), stage)
    before = worker.stat()
    worker.write_text("A = 2\n")
    os.utime(worker, ns=(before.st_atime_ns, before.st_mtime_ns))
    stage_modules(collect_modules(load_project(project)), stage)
    assert _files(stage) == {"worker.py": "A = 2\n"}
