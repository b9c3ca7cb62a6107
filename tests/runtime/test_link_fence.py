"""Where a link in a worker project may lead (``link_fence.py``): inside the project, beside it
(its parent folder, its git repository's root) or into an installed-packages folder, through
no hidden folder, to no file the project never uploads, never into /proc. Real files, links
and folders, HOME a folder of the test's own. The refused cases are review37's probes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ember.config import load_project
from ember.errors import ConfigError
from ember.runtime.dev_watch import dev_watch_list
from ember.runtime.worker_modules import collect_modules

RULES = "rules:\n  - type: Text\n    globs: ['**/*.txt', '**/*.yml', '**/*.cfg']\n"


def _write(path: Path, text: str = "SECRET\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _project(root: Path) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "python_modules").mkdir(exist_ok=True)
    (root / "ember.yaml").write_text("name: app\nmain: worker.py\n" + RULES)
    (root / "worker.py").write_text("x = 1\n")
    return root


def _keyring(home: Path) -> tuple[Path, str, Path]:
    """#5: bf6a0f1 counted hidden folders only below where target and project part."""
    project = _project(home / ".local" / "src" / "proj")
    target = _write(home / ".local" / "share" / "keyrings" / "login.keyring")
    return project, "src/k.txt", target


def _gh_hosts(home: Path) -> tuple[Path, str, Path]:
    """#6: a project in ~/.config had ~/.config/gh (an OAuth token) beside it."""
    project = _project(home / ".config" / "myapp")
    target = _write(home / ".config" / "gh" / "hosts.yml", "oauth_token: gho_SECRET\n")
    return project, "src/hosts.yml", target


def _gh_folder(home: Path) -> tuple[Path, str, Path]:
    """hidden_sibling_folder.py: the same, linking the folder."""
    project, _, hosts = _gh_hosts(home)
    return project, "python_modules/gh", hosts.parent


def _environ(home: Path) -> tuple[Path, str, Path]:
    """#7: the deploying CLI's environment (EMBER_API_TOKEN) went up as Text."""
    return _project(home / "work" / "app"), "src/env.txt", Path("/proc/self/environ")


def _passwd(home: Path) -> tuple[Path, str, Path]:
    """#8: no hidden folder on the way, so nothing refused it."""
    return _project(home / "work" / "app"), "src/passwd.txt", Path("/etc/passwd")


def _package_with_a_key(home: Path) -> tuple[Path, str, Path]:
    """#9: a link inside a linked installed package is fenced too."""
    project = _project(home / "work" / "app")
    site = home / ".local" / "lib" / "python3.12" / "site-packages"
    _write(site / "requests" / "__init__.py", "v = 1\n")
    key = _write(home / ".ssh" / "id_ed25519")
    os.symlink(key, site / "requests" / "key.txt")
    os.symlink(site / "requests", project / "python_modules" / "requests")
    return project, "python_modules/requests/key.txt", key


def _dev_vars(home: Path) -> tuple[Path, str, Path]:
    """#10: a link to a file inside the project was never fenced."""
    project = _project(home / "work" / "app")
    return project, "src/vars.txt", _write(project / ".dev.vars", "API_KEY=sk-live-SECRET\n")


def _git_config(home: Path) -> tuple[Path, str, Path]:
    """#11: the token in the remote's URL."""
    project = _project(home / "work" / "app")
    config = _write(project / ".git" / "config", "url = https://u:ghp_TOKEN@github.com/x\n")
    return project, "src/git.cfg", config


def _hidden_in_site_packages(home: Path) -> tuple[Path, str, Path]:
    """#16: ``site-packages`` anywhere on the path forgave every hidden folder below it."""
    project = _project(home / "work" / "app")
    return project, "src/t.txt", _write(home / "x" / "site-packages" / ".h" / "t.txt")


def _dotfiles_repository(home: Path) -> tuple[Path, str, Path]:
    """A git repository at the home folder (dotfiles) is no monorepo: all of home is not
    beside a project in it."""
    (home / ".git").mkdir(parents=True)
    project = _project(home / "work" / "app")
    return project, "src/notes.txt", _write(home / "notes" / "bank.txt")


def _home_sibling(home: Path) -> tuple[Path, str, Path]:
    """review38 A: a project directly in the home folder had all of ``~`` beside it: macOS's
    ``~/Library/Keychains`` (not dot-hidden), a service account's key in ``~``."""
    project = _project(home / "proj")
    return project, "src/k.txt", _write(home / "Library" / "Keychains" / "login.txt")


def _home_repository_sibling(home: Path) -> tuple[Path, str, Path]:
    """The same with a dotfiles repository at ``~``: the home folder as the parent and as the
    repository's root."""
    (home / ".git").mkdir(parents=True)
    project = _project(home / "proj")
    return project, "src/sa.txt", _write(home / "gcp-service-account.txt")


def _shared_tmp(home: Path) -> tuple[Path, str, Path]:
    """review38 B: a project in /tmp had every user's /tmp beside it (a Kerberos ticket): a
    world-writable sticky folder of the test's own stands for /tmp."""
    shared = home.parent / "systmp"
    shared.mkdir()
    shared.chmod(0o1777)
    project = _project(shared / "proj")
    return project, "src/ticket.txt", _write(shared / "krb5cc_1000.txt", "TICKET\n")


def _stray_git_file(home: Path) -> tuple[Path, str, Path]:
    """review38 C: any ``.git`` entry far above the project (a stray file) made its folder a
    repository's root, and all below it beside the project."""
    srv = home.parent / "srv"
    _write(srv / ".git", "gitdir: /nowhere\n")
    project = _project(srv / "a" / "b" / "proj")
    return project, "src/s.txt", _write(srv / "other-app" / "secrets.txt")


def _empty_git_folder(home: Path) -> tuple[Path, str, Path]:
    """review40: an empty ``.git`` folder (or one a file's ``gitdir: /`` names) is no
    repository: git itself wants HEAD, objects/ and refs/."""
    srv = home.parent / "srv"
    (srv / ".git").mkdir(parents=True)
    project = _project(srv / "a" / "b" / "proj")
    return project, "src/s.txt", _write(srv / "other-app" / "secrets.txt")


def _git_file_naming_root(home: Path) -> tuple[Path, str, Path]:
    srv = home.parent / "srv"
    _write(srv / ".git", "gitdir: /\n")
    project = _project(srv / "a" / "b" / "proj")
    return project, "src/s.txt", _write(srv / "other-app" / "secrets.txt")


def _git_dir(path: Path, *, worktree: bool = False) -> Path:
    """What git takes for a git folder: HEAD, and objects/ and refs/ (a worktree's: a
    commondir file instead)."""
    _write(path / "HEAD", "ref: refs/heads/main\n")
    if worktree:
        _write(path / "commondir", "../..\n")
    else:
        (path / "objects").mkdir()
        (path / "refs").mkdir()
    return path


def _dangling_git_link(home: Path) -> tuple[Path, str, Path]:
    """The same with a ``.git`` link that leads nowhere."""
    srv = home.parent / "srv"
    (srv / "a" / "b").mkdir(parents=True)
    os.symlink(srv / "gone", srv / ".git")
    project = _project(srv / "a" / "b" / "proj")
    return project, "src/s.txt", _write(srv / "other-app" / "secrets.txt")


@pytest.mark.parametrize(
    ("case", "rule"),
    [
        (_home_sibling, "outside the project, with nothing beside it"),
        (_home_repository_sibling, "outside the project, with nothing beside it"),
        (_shared_tmp, "outside the project, with nothing beside it"),
        (_stray_git_file, "outside the project, not beside it (below "),
        (_dangling_git_link, "outside the project, not beside it (below "),
        (_empty_git_folder, "outside the project, not beside it (below "),
        (_git_file_naming_root, "outside the project, not beside it (below "),
        (_keyring, "outside the project, not beside it"),
        (_gh_hosts, "outside the project, with nothing beside it"),
        (_gh_folder, "outside the project, with nothing beside it"),
        (_environ, "below /proc"),
        (_passwd, "outside the project, not beside it"),
        (_package_with_a_key, "outside the project, not beside it"),
        (_dev_vars, "inside the project, through the hidden .dev.vars"),
        (_git_config, "inside the project, through the hidden .git"),
        (_hidden_in_site_packages, "in an installed-packages folder (site-packages), through"),
        (_dotfiles_repository, "outside the project, not beside it"),
    ],
)
def test_a_link_that_leads_to_secrets_is_refused_naming_it_and_the_rule(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: Callable[[Path], tuple[Path, str, Path]],
    rule: str,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project, name, target = case(home)
    link = project / name
    if not link.is_symlink():
        os.symlink(target, link)
    with pytest.raises(ConfigError) as error:
        collect_modules(load_project(project))
    message = str(error.value)
    assert f"the link {name} -> {os.path.realpath(target)}, {rule}" in message, message
    assert "expected a link to a file or folder beside or below the project" in message
    # ember dev keeps watching the link's folder: removing it reloads.
    assert link.parent in dev_watch_list(load_project(project)).dirs


@pytest.mark.parametrize("where", ["home", "above"])
def test_a_project_at_or_above_the_home_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """#15: a project at ~ had ~/.ssh "inside the project"; its src/k.txt went up. One above
    the home folder (/home) would walk every user's."""
    home = tmp_path / "home" / "me"
    monkeypatch.setenv("HOME", str(home))
    _write(home / ".ssh" / "id_ed25519")
    project = _project(home if where == "home" else tmp_path / "home")
    os.symlink(home / ".ssh" / "id_ed25519", project / "src" / "k.txt")
    with pytest.raises(ConfigError) as error:
        collect_modules(load_project(project))
    message = str(error.value)
    assert f"the project's root ({os.path.realpath(project)}) is or holds your home" in message
    assert "expected a project in a folder of its own" in message


def test_the_links_a_project_needs_are_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the allow-list is for: a monorepo's ``../../shared/lib`` (below the git
    repository's root), ``../shared`` beside the project, a venv's site-packages inside the
    project, packages of ~/.conda and ~/.pyenv, and a project inside a hidden folder linking
    its sibling. Review36's layouts, each refused by some earlier fence."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    repo = home / "code" / "mono"
    _git_dir(repo / ".git")
    project = _project(repo / "apps" / "api")
    _write(repo / "shared" / "lib" / "util.py", "")
    os.symlink("../../shared/lib", project / "lib")
    _write(repo / "apps" / "shared" / "common.py", "")
    os.symlink("../../shared", project / "src" / "shared")
    venv = project / ".venv" / "lib" / "python3.12" / "site-packages"
    _write(venv / "requests" / "api.py", "")
    os.symlink(venv / "requests", project / "python_modules" / "requests")
    conda = home / ".conda" / "envs" / "x" / "lib" / "python3.11" / "site-packages"
    os.symlink(_write(conda / "six.py", ""), project / "python_modules" / "six.py")
    pyenv = home / ".pyenv" / "versions" / "3.12.1" / "lib" / "python3.12" / "dist-packages"
    _write(pyenv / "attrs" / "__init__.py", "")
    os.symlink(pyenv / "attrs", project / "python_modules" / "attrs")
    assert [m.name for m in collect_modules(load_project(project))] == [
        "worker.py",
        "lib/util.py",
        "src/shared/common.py",
        "python_modules/attrs/__init__.py",
        "python_modules/requests/api.py",
        "python_modules/six.py",
    ]
    hidden = _project(home / ".work" / "proj" / "app")
    _write(home / ".work" / "proj" / "shared" / "ext" / "m.py", "")
    os.symlink("../shared/ext", hidden / "ext")
    assert [m.name for m in collect_modules(load_project(hidden))] == ["worker.py", "ext/m.py"]


def test_a_worktree_git_file_and_a_sub_folder_of_home_anchor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What review38's narrower anchors keep: a git worktree's ``.git`` file (``gitdir:``
    naming a folder, relative or absolute) makes its folder the repository's root, and a
    sub-folder of home (``~/code``) is a parent whose other folders are beside the project."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    _git_dir(home / "repos" / "mono.git")
    _git_dir(home / "repos" / "mono.git" / "worktrees" / "wt", worktree=True)
    for gitdir in ("../../repos/mono.git/worktrees/wt", str(home / "repos" / "mono.git")):
        tree = home / "trees" / f"t{len(gitdir)}"
        _write(tree / ".git", f"gitdir: {gitdir}\n")
        project = _project(tree / "apps" / "api")
        _write(tree / "shared" / "lib" / "util.py", "")
        os.symlink("../../shared/lib", project / "lib")
        names = [m.name for m in collect_modules(load_project(project))]
        assert names == ["worker.py", "lib/util.py"], gitdir
    project = _project(home / "code" / "proj")
    _write(home / "code" / "shared" / "u.py", "")
    os.symlink("../shared", project / "shared")
    assert [m.name for m in collect_modules(load_project(project))] == [
        "worker.py",
        "shared/u.py",
    ]
