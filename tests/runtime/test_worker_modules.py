"""``stage_modules``: the directory ``ember dev`` runs a worker from holds exactly its modules,
kept in step with the project as files are edited, added, or stop being modules."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ember.config import load_project
from ember.runtime import worker_modules
from ember.runtime.racy import RACY_NS, same_bytes
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


def test_a_linked_folder_is_walked_once_under_its_first_name(tmp_path: Path) -> None:
    """``ext -> ../outside/ext``: its files are modules under the link's name. A second link to
    it (``ext2``) and a link to a folder of the project (``alias -> pkg``) are walked no more:
    each was walked again per name, so a diamond of links walked 2^k paths."""
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (tmp_path / "outside" / "ext").mkdir(parents=True)
    (tmp_path / "outside" / "ext" / "mod.py").write_text("WORD = 1\n")
    (tmp_path / "outside" / "ext" / "notes.md").write_text("no rule picks me")
    (project / "ember.yaml").write_text("name: w\nmain: worker.py\n")
    (project / "worker.py").write_text("import ext.mod\n")
    (project / "pkg" / "util.py").write_text("X = 1\n")
    os.symlink("../outside/ext", project / "ext2")
    os.symlink("../outside/ext", project / "ext")
    os.symlink("pkg", project / "alias")
    os.symlink(".", project / "pkg" / "self")
    modules = collect_modules(load_project(project))
    assert [m.name for m in modules] == ["worker.py", "ext/mod.py", "pkg/util.py"]
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


def test_a_copy_made_in_its_sources_racy_window_is_compared_only_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module staged within RACY_NS of being written (dev started right after a checkout)
    kept a copy whose ctime never moves, so each later reload read it and its source again,
    for good (a 64 MiB Data module: 0.1 s a reload). Past the window one compare finds it
    equal and the copy's ctime moves; from then on its stat is trusted. Counts compares."""
    compares: list[str] = []

    def counting(a: str, b: str) -> bool:
        compares.append(a)
        return same_bytes(a, b)

    monkeypatch.setattr(worker_modules, "same_bytes", counting)
    project = tmp_path / "project"
    project.mkdir()
    (project / "ember.yaml").write_text("name: w\nmain: worker.py\n")
    worker = project / "worker.py"
    worker.write_text("A = 1\n")
    stage = tmp_path / "stage"
    modules = collect_modules(load_project(project))
    stage_modules(modules, stage)
    # Wait (not assert on time) until the source's last change is past the window.
    until = worker.stat().st_ctime_ns + RACY_NS
    while time.time_ns() <= until:
        time.sleep(0.05)
    stage_modules(modules, stage)
    assert len(compares) == 1  # the copy was made within the window: compared once more
    for _ in range(3):
        stage_modules(modules, stage)
    assert len(compares) == 1
    # Trusted, not ignored: a same-size edit that keeps the mtime moves the source's ctime.
    before = worker.stat()
    worker.write_text("A = 2\n")
    os.utime(worker, ns=(before.st_atime_ns, before.st_mtime_ns))
    stage_modules(modules, stage)
    assert _files(stage) == {"worker.py": "A = 2\n"}
