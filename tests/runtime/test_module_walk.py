"""The module walk's bounds on links to folders: none that holds the project or the home
folder, each real folder walked once, and a cap on what links lead to. Counts, never time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ember.config import load_project
from ember.errors import ConfigError
from ember.runtime.dev_watch import dev_watch_list
from ember.runtime.link_fence import Fence
from ember.runtime.module_walk import LinkLimits, walk_files
from ember.runtime.worker_modules import collect_modules, scan_modules


def _project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "ember.yaml").write_text("name: w\nmain: worker.py\n")
    (root / "worker.py").write_text("A = 1\n")
    return root


@pytest.mark.parametrize("target", ["..", "/", "HOME", "."])
def test_a_link_to_a_folder_that_holds_the_project_or_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """``up -> ..`` walked the parent folder (a sibling project's creds.py was a module),
    ``vendor -> ~`` the whole home folder, and ``ember deploy`` uploaded it all."""
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    (home / "work" / "settings_local.py").write_text("SECRET = 1\n")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "creds.py").write_text("KEY = 1\n")
    monkeypatch.setenv("HOME", str(home))
    project = _project(tmp_path / "app")
    (project / "pkg").mkdir()
    link = project / "pkg" / "up"
    os.symlink(str(home) if target == "HOME" else os.path.join("..", target), link)
    with pytest.raises(ConfigError) as error:
        collect_modules(load_project(project))
    message = str(error.value)
    assert str(link) in message and f"pkg/up -> {os.path.realpath(link)}" in message
    assert "expected a link to a file or folder beside or below the project" in message


def test_a_link_behind_a_link_back_into_the_project_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path / "app")
    (tmp_path / "shared" / "ext").mkdir(parents=True)
    (tmp_path / "shared" / "ext" / "mod.py").write_text("")
    os.symlink("../../app", tmp_path / "shared" / "ext" / "back")
    os.symlink("../shared/ext", project / "ext")
    with pytest.raises(ConfigError, match="ext/back -> "):
        scan_modules(load_project(project))


def test_a_diamond_of_links_is_walked_once(tmp_path: Path) -> None:
    """14 folders that each link twice to the next walked 2^14 paths: 16,385 modules and
    32,768 watched folders for one real file."""
    bottom = tmp_path / "diamond"
    bottom.mkdir()
    (bottom / "m.py").write_text("")
    level = bottom
    for i in range(14):
        above = tmp_path / f"level{i}"
        above.mkdir()
        os.symlink(level, above / "b")
        os.symlink(level, above / "a")
        level = above
    project = _project(tmp_path / "app")
    os.symlink(level, project / "deps")
    scan = scan_modules(load_project(project))
    assert [m.name for m in scan.modules] == ["worker.py", "deps" + "/a" * 14 + "/m.py"]
    assert len(scan.dirs) == 16  # the project, and each real folder once


def test_what_links_lead_to_is_capped_with_an_error_naming_the_link(tmp_path: Path) -> None:
    tree = tmp_path / "big"
    for i in range(6):
        (tree / f"d{i}").mkdir(parents=True)
        (tree / f"d{i}" / "m.py").write_text("")
    project = _project(tmp_path / "app")
    os.symlink(tree, project / "lib")
    fence = Fence.around(project_root=project)
    dirs: list[Path] = []
    assert len(walk_files(project, dirs, fence, limits=LinkLimits(dirs=7, files=6))) == 8
    with pytest.raises(ConfigError, match=r"^lib: expected a link to a package folder"):
        walk_files(project, [], fence, limits=LinkLimits(dirs=6, files=100))
    with pytest.raises(ConfigError, match="more than 1,000 folders or 5 files"):
        walk_files(project, [], fence, limits=LinkLimits(dirs=1000, files=5))


def test_dev_watches_the_project_while_a_link_is_refused(tmp_path: Path) -> None:
    """The watch list is the same walk: a refused link raised from the poll's rescan on every
    poll; the reload is what reports it, so the watcher keeps watching the project's folder
    (the link's removal moves its mtime)."""
    project = _project(tmp_path / "app")
    os.symlink("..", project / "up")
    watched = dev_watch_list(load_project(project))
    assert project in watched.dirs


@pytest.mark.parametrize("where", ["home", "elsewhere"])
def test_a_link_to_a_hidden_folder_outside_the_project_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """``aws -> ~/.aws`` passed the fence (it does not hold home): credentials.py became a
    module ``ember deploy`` uploads. Refused under home or not (``/srv/.secrets/pkg``), as
    the first link or behind one, and a hidden folder beside the project or inside it."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    hidden = (home / ".aws") if where == "home" else (tmp_path / "srv" / ".secrets" / "pkg")
    hidden.mkdir(parents=True)
    (hidden / "credentials.py").write_text("KEY = 'secret'\n")
    project = _project(home / "proj" / "app")
    shared = home / "proj" / "shared" / "ext"
    shared.mkdir(parents=True)
    os.symlink(hidden, shared / "aws")
    os.symlink(hidden, project / "aws")
    with pytest.raises(ConfigError) as error:
        collect_modules(load_project(project))
    message = str(error.value)
    assert f"aws -> {hidden}" in message and "outside the project" in message
    os.unlink(project / "aws")
    os.symlink("../shared/ext", project / "ext")
    with pytest.raises(ConfigError, match=f"ext/aws -> {hidden}"):
        collect_modules(load_project(project))
    # Beside the project, a hidden folder is refused by name.
    os.unlink(shared / "aws")
    (shared.parent / ".secrets").mkdir()
    os.symlink("../.secrets", shared / "aws")
    with pytest.raises(ConfigError, match="ext/aws -> .*, beside the project .*hidden .secrets"):
        collect_modules(load_project(project))
    # A hidden folder inside the project is refused too: what the walk itself skips.
    os.unlink(shared / "aws")
    (project / ".cfg" / "pkg").mkdir(parents=True)
    (project / ".cfg" / "pkg" / "m.py").write_text("")
    os.symlink(".cfg/pkg", project / "cfg")
    with pytest.raises(ConfigError, match="cfg -> .*, inside the project, through the hidden"):
        collect_modules(load_project(project))


def test_a_folder_reached_from_the_project_and_python_modules_goes_up_once(
    tmp_path: Path,
) -> None:
    """The two walks kept two sets of walked folders: ``lib -> python_modules/pkg`` uploaded
    big.py as a module and as Data, ``python_modules/src -> ../src`` uploaded src twice. A
    folder of the project's own (python_modules/ included) keeps its own name; the link is
    left out, and said to be."""
    project = _project(tmp_path / "app")
    (project / "python_modules" / "pkg").mkdir(parents=True)
    (project / "python_modules" / "pkg" / "big.py").write_text("x = 1\n")
    (project / "src").mkdir()
    (project / "src" / "util.py").write_text("y = 2\n")
    os.symlink("python_modules/pkg", project / "lib")
    os.symlink("../src", project / "python_modules" / "src")
    scan = scan_modules(load_project(project))
    assert [(m.name, m.type) for m in scan.modules] == [
        ("worker.py", "PythonModule"),
        ("src/util.py", "PythonModule"),
        ("python_modules/pkg/big.py", "Data"),
    ]
    assert [(d.name, d.kept) for d in scan.dropped] == [
        ("lib", "python_modules/pkg"),
        ("python_modules/src", "src"),
    ]


def test_a_refused_link_names_the_folders_to_watch_until_it_is_fixed(tmp_path: Path) -> None:
    """A refused link below the root (``src/pkg/up``): dev watched only the root and the
    module root, so the link's removal, in src/pkg, was never seen."""
    project = _project(tmp_path / "app")
    (project / "src" / "pkg").mkdir(parents=True)
    os.symlink("../../..", project / "src" / "pkg" / "up")
    watched = dev_watch_list(load_project(project))
    assert project / "src" / "pkg" in watched.dirs and project in watched.dirs


def test_a_link_to_one_file_in_a_hidden_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only folder links were fenced: ``src/key.txt -> ~/.ssh/id_ed25519`` went up as Text and
    ``python_modules/creds -> ~/.aws/credentials`` as Data (review36)."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE\n")
    project = _project(home / "work" / "app")
    os.symlink(home / ".ssh" / "id_ed25519", project / "key.py")
    with pytest.raises(ConfigError, match="key.py -> .*id_ed25519, outside the project"):
        collect_modules(load_project(project))
    # A link to a file of the project, or beside it with no hidden folder, is walked.
    os.unlink(project / "key.py")
    (home / "work" / "shared").mkdir()
    (home / "work" / "shared" / "util.py").write_text("")
    os.symlink("../shared/util.py", project / "util.py")
    os.symlink("worker.py", project / "again.py")
    names = sorted(m.name for m in collect_modules(load_project(project)))
    assert names == ["again.py", "util.py", "worker.py"]


def test_a_project_in_a_hidden_folder_and_a_site_packages_link_are_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hidden-folder rule refused ``~/.work/proj/app``'s link to ``../shared/ext`` and a
    package linked from ``~/.local/lib/python3.12/site-packages`` (review36): the project's
    parent folder is beside it, and an installed package is no secret. A parent folder that
    is hidden itself (``~/.work``) is not: ``~/.config/gh`` beside ``~/.config/myapp``
    (review37, test_link_fence.py)."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    project = _project(home / ".work" / "proj" / "app")
    (home / ".work" / "proj" / "shared" / "ext").mkdir(parents=True)
    (home / ".work" / "proj" / "shared" / "ext" / "m.py").write_text("")
    os.symlink("../shared/ext", project / "ext")
    site = home / ".local" / "lib" / "python3.12" / "site-packages" / "requests"
    site.mkdir(parents=True)
    (site / "api.py").write_text("")
    (project / "python_modules").mkdir()
    os.symlink(site, project / "python_modules" / "requests")
    names = sorted(m.name for m in collect_modules(load_project(project)))
    assert names == ["ext/m.py", "python_modules/requests/api.py", "worker.py"]


def test_the_walk_stats_no_file_to_know_it_is_no_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An lstat per file (``os.path.islink``) was half a 10,000-file walk's CPU, on each
    ``ember dev`` rescan (review37): the listing already says which entries are links. So the
    lstats a walk makes do not grow with its files. Counts, not time."""
    project = _project(tmp_path / "app")
    fence = Fence.around(project_root=project)
    calls: list[object] = []
    real_lstat = os.lstat

    def counted(path: object, *args: object, **kwargs: object) -> os.stat_result:
        calls.append(path)
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    counts = []
    for files in (10, 200):
        (project / f"pkg{files}").mkdir()
        for i in range(files):
            (project / f"pkg{files}" / f"m{i}.py").write_text("")
        calls.clear()
        with monkeypatch.context() as patch:
            patch.setattr(os, "lstat", counted)
            found = walk_files(project / f"pkg{files}", [], fence)
        assert len(found) == files
        counts.append(len(calls))
    assert counts[0] == counts[1], counts
