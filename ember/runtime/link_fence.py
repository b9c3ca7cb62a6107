"""Where a link in a Worker project may lead: the rule ``module_walk`` applies to every link
it meets, to a folder or to one file, after resolving every link in the chain.

An allow-list, the one the refusal states. A link may lead only

(a) inside the project, to a path ``never_uploaded`` does not refuse (``.dev.vars``, ``.env*``,
    ``.git/``: what the assets walk never publishes either) with no hidden part below the
    project (what the walk itself skips);
(b) beside the project: below its parent folder, or below the root of the git repository
    that holds it (``../../shared/lib`` in a monorepo), with no hidden part below that folder
    and to no ``never_uploaded`` file. Neither folder counts when it is ``/``, the home folder
    or above it (a project in ``~/proj`` has ``~/Library/Keychains`` beside it; a dotfiles
    repository is no monorepo), hidden itself (a project in ``~/.config/myapp`` has
    ``~/.config/gh``, a token, beside it), or world-writable (``/tmp`` holds other users'
    files). A repository's root holds a ``.git`` folder, or a worktree's ``.git`` file
    naming one;
(c) into an installed-packages folder: a path through ``site-packages`` or
    ``dist-packages`` with no hidden part below that segment (above it, ``~/.pyenv/...`` or
    ``.venv/lib/...``, is fine);

and never below ``/proc``, ``/sys``, ``/dev`` or ``/run`` (``/proc/self/environ`` is the
deploying CLI's environment), nor to a folder that holds the project, its module root or the
home folder. A Python install's standard library (``~/.pyenv/versions/3.12.1/lib/python3.12``)
is none of these: the platform has its own, and vendoring it is a mistake, so it stays refused.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ember.bindings.assets.ignore import never_uploaded

SYSTEM = ("/proc", "/sys", "/dev", "/run")
PACKAGES = frozenset({"site-packages", "dist-packages"})


@dataclass(frozen=True, slots=True)
class Fence:
    """The real paths the rule is relative to: ``roots`` no link may lead to or above (the
    module root, the project's root, the home folder), the project, and the folders beside it
    whose contents a link may lead to."""

    roots: tuple[tuple[str, str], ...]  # (real path, what it is: "project root")
    project: str | None = None  # the project's real root
    beside: tuple[str, ...] = ()  # real folders below which (b) allows a link

    @classmethod
    def around(cls, **paths: Path | None) -> Fence:
        """``Fence.around(module_root=..., project_root=..., home_folder=...)``: the folders
        beside the project are found here (a few stats: the git repository's root)."""
        roots = tuple(
            (os.path.realpath(p), what.replace("_", " ")) for what, p in paths.items() if p
        )
        project_root, home_folder = paths.get("project_root"), paths.get("home_folder")
        if project_root is None:
            return cls(roots)
        project = os.path.realpath(project_root)
        home = os.path.realpath(home_folder) if home_folder is not None else None
        return cls(roots, project, _beside(project, home))

    def refusal(self, target: str) -> str | None:
        """Why a link may not lead to the real path ``target``, naming the rule it broke; None
        when it may."""
        system = next((s for s in SYSTEM if _within(target, s)), None)
        if system is not None:
            return f"below {system}, the system's (never a module)"
        outer = target.rstrip(os.sep) + os.sep
        held = next(
            (f"{what} ({r})" for r, what in self.roots if r == target or r.startswith(outer)),
            None,
        )
        if held is not None:
            return f"a folder that holds the {held}"
        packages = _packages_refusal(Path(target).parts)
        if packages == "":
            return None
        if self.project is not None and _within(target, self.project):
            return _place_refusal(target, self.project, "inside the project")
        refusals = [
            _place_refusal(target, anchor, f"beside the project (below {anchor})")
            for anchor in self.beside
            if _within(target, anchor)
        ]
        if refusals and None in refusals:
            return None
        if refusals:
            return refusals[0]
        if packages:
            return packages
        beside = (
            f"not beside it (below {' or '.join(self.beside)})"
            if self.beside
            else "with nothing beside it a link may lead to (its parent folder is /, the "
            "home folder or above it, hidden, or world-writable like /tmp)"
        )
        return (
            f"outside the project, {beside}, and not in an installed-packages folder "
            "(site-packages, dist-packages)"
        )


def _beside(project: str, home: str | None) -> tuple[str, ...]:
    """The project's parent folder and its git repository's root (the nearest folder at or
    above it holding a git ``.git``), those that may be (b)'s."""
    parent = os.path.dirname(project)
    repo = next(
        (
            str(folder)
            for folder in (Path(project), *Path(project).parents)
            if _is_repository(str(folder))
        ),
        None,
    )
    found = [parent] if _may_anchor(parent, home) else []
    # At or above the parent folder when not the project itself: the parent already counts.
    if repo is not None and repo not in (project, parent) and _may_anchor(repo, home):
        found.append(repo)
    return tuple(found)


def _is_repository(folder: str) -> bool:
    """A ``.git`` folder, or a worktree's ``.git`` file reading ``gitdir: <path>`` that names
    a folder (relative to ``folder`` when not absolute). A stray file or a dangling link named
    ``.git`` is none: it would make everything below a folder far above the project (``/srv``)
    beside it."""
    entry = os.path.join(folder, ".git")
    if os.path.isdir(entry):
        return _is_git_dir(entry)
    if not os.path.isfile(entry):
        return False
    try:
        with open(entry, encoding="utf-8") as file:
            first = file.readline(4096)
    except (OSError, UnicodeDecodeError):
        return False
    key, _, gitdir = first.partition(":")
    gitdir = gitdir.strip()
    return key == "gitdir" and bool(gitdir) and _is_git_dir(os.path.join(folder, gitdir))


def _is_git_dir(path: str) -> bool:
    """What git itself takes for a git folder: a ``HEAD`` file, and ``objects/`` and
    ``refs/`` (a worktree's has a ``commondir`` file instead of them). An empty ``.git``
    folder, or a ``.git`` file reading ``gitdir: /``, names none (review40)."""
    if not os.path.isfile(os.path.join(path, "HEAD")):
        return False
    if os.path.isfile(os.path.join(path, "commondir")):
        return True
    return os.path.isdir(os.path.join(path, "objects")) and os.path.isdir(
        os.path.join(path, "refs")
    )


def _may_anchor(folder: str, home: str | None) -> bool:
    """Not ``/``, not the home folder or above it (a project in ``~/proj`` would have
    ``~/Library/Keychains`` beside it), not hidden itself (``~/.config``, ``~/.local``: where
    tools keep tokens), and not world-writable (``/tmp``, ``/var/tmp``: other users' files,
    a Kerberos ticket in ``/tmp/krb5cc_1000``)."""
    if home is not None and _within(home, folder):
        return False
    if folder == os.sep or os.path.basename(folder).startswith("."):
        return False
    try:
        mode = os.stat(folder).st_mode
    except OSError:
        return False
    return not mode & stat.S_IWOTH


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _place_refusal(target: str, folder: str, where: str) -> str | None:
    """Rules (a) and (b): no hidden part below ``folder``, no file the project never uploads."""
    below = os.path.relpath(target, folder).replace(os.sep, "/")
    parts = [] if below == "." else below.split("/")
    hidden = next((p for p in parts if p.startswith(".")), None)
    if hidden is not None:
        return f"{where}, through the hidden {hidden}"
    # As a file (``.dev.vars``) and as a folder (its every part a folder: ``node_modules/``).
    if parts and (never_uploaded(below) or never_uploaded(below + "/")):
        return f"{where}, a path the project never uploads ({below})"
    return None


def _packages_refusal(parts: tuple[str, ...]) -> str | None:
    """Rule (c): ``""`` when ``parts`` pass through an installed-packages folder with no
    hidden part below it, why not when one is below it, None when there is no such folder."""
    at = next((i for i, p in enumerate(parts) if p in PACKAGES), None)
    if at is None:
        return None
    hidden = next((p for p in parts[at + 1 :] if p.startswith(".")), None)
    if hidden is None:
        return ""
    return f"in an installed-packages folder ({parts[at]}), through the hidden {hidden} below it"
