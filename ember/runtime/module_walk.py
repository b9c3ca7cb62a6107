"""The walk that finds a Worker's files: the project's own folders, then the folders its links
lead to, each real folder once, never one that holds the project.

A link to a folder (``ext -> ../shared/ext``, a package shared between projects) is walked as
a folder, its files named through the link, as Python imports them. What bounds it:

- Every link met, to a folder or to one file, must lead where ``link_fence.Fence`` allows:
  inside the project, beside it, or into an installed-packages folder, through no hidden
  folder and to no file the project never uploads (``vars.txt -> ../.dev.vars``, ``aws ->
  ~/.aws``, ``env.txt -> /proc/self/environ``), and not to a folder that holds the module
  root, the project's root or the user's home folder (``up -> ..``, ``vendor -> ~``). Else
  the walk stops with an error naming the link, where it leads and the rule it broke.
- Each real folder is walked once, in one walk of the module root and python_modules/
  together. The project's own folders (python_modules/'s too) are walked first, under their
  own names; a folder reached only through links is walked under the first of those names in
  name order (``ext`` before ``ext2``) and the others are left out, so two links to one folder
  are one package, and a chain of folders that each link twice to the next (a diamond) is
  walked once, not once per path through it (2^k paths for k levels). The names left out
  are returned (``DroppedLink``), for ``ember dev`` and ``ember deploy`` to say so.
- What links lead to is capped (``LinkLimits``): past it the walk stops with an error naming
  the link it was in, rather than walking ``/usr`` on each ``ember dev`` poll.

wrangler does not follow folder links at all (its module walk, ``getFiles`` in workers-sdk's
``find-additional-modules.ts``, recurses only into entries whose ``Dirent`` is a directory, and
a link's is not); docs/workers.md says where ember differs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ConfigError
from ember.runtime.link_fence import Fence

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "venv"})


@dataclass(frozen=True, slots=True)
class LinkLimits:
    """How much the folders behind links may hold, all links of one walk together. A shared
    package is tens of folders; a link to a system tree is thousands."""

    dirs: int = 1_000
    files: int = 10_000


@dataclass(frozen=True, slots=True)
class Tree:
    """One folder to walk: its files are named ``prefix`` + their path below ``root``;
    ``skip``: folders left out, by ``/``-separated path below ``root``."""

    root: Path
    prefix: str = ""
    skip: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class DroppedLink:
    """A folder left out because its real folder is walked under another name: ``import
    <name>`` fails where ``import <kept>`` works."""

    name: str  # ``alias``
    kept: str  # ``src/pkg``


@dataclass(frozen=True, slots=True)
class Walk:
    """What ``walk_trees`` found: per tree, its files as (name, path) sorted by name (not yet
    known to be regular files); and the folders left out as walked under another name."""

    files: tuple[tuple[tuple[str, str], ...], ...]
    dropped: tuple[DroppedLink, ...]


class LinkRefused(ConfigError):
    """A folder link the walk refuses. ``dirs``: the folders walked until then, the refused
    link's own folder among them: ``ember dev`` watches them, since the link's removal (or
    its new target) moves its folder's mtime, and nothing else may."""

    def __init__(self, file: str, found: str, expected: str, *, hint: str) -> None:
        super().__init__(file, None, found, expected, hint=hint)
        self.dirs: tuple[Path, ...] = ()


def walk_files(
    root: Path,
    dirs: list[Path],
    fence: Fence,
    skip: frozenset[str] = frozenset(),
    limits: LinkLimits = LinkLimits(),
) -> list[tuple[str, str]]:
    """``walk_trees`` of one tree: its files."""
    return list(walk_trees((Tree(root, skip=skip),), dirs, fence, limits).files[0])


def walk_trees(
    trees: tuple[Tree, ...],
    dirs: list[Path],
    fence: Fence,
    limits: LinkLimits = LinkLimits(),
) -> Walk:
    """Every file under the ``trees`` but the skipped ones; the folders walked are added to
    ``dirs``. One set of walked folders for all: each tree's own folders first, under their
    own names, then the links of every tree (the first tree's first, each tree's in name
    order), so a folder a link of one tree leads to in another is walked once, under the name
    it has in its own tree. Raises LinkRefused for a link that leads to a folder the fence
    refuses, or past ``limits``.
    Strings, not Paths: a Path per file was most of a watch poll's cost."""
    walker = _Walker(dirs, fence, limits)
    try:
        return walker.walk(trees)
    except LinkRefused as refused:
        refused.dirs = tuple(dirs)  # the refused link's folder was walked before its entries
        raise


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """A folder, or a link to one (as os.walk sorts them); a link that dangles is a file."""
    try:
        return entry.is_dir()
    except OSError:
        return False


class _Walker:
    """One walk's state: the real folders walked (to the name each is walked under), what
    links' folders may still hold, the folders left out."""

    def __init__(self, dirs: list[Path], fence: Fence, limits: LinkLimits) -> None:
        self.dirs = dirs
        self.fence = fence
        self.limits = limits
        self.walked: dict[str, str] = {}
        self.dropped: list[DroppedLink] = []
        self.spent_dirs = 0
        self.spent_files = 0
        self.link = ""  # the link being walked

    def walk(self, trees: tuple[Tree, ...]) -> Walk:
        found: list[list[tuple[str, str]]] = []
        links: list[tuple[int, str, str]] = []
        for index, tree in enumerate(trees):
            top = str(tree.root)
            real = os.path.realpath(top)
            self.walked.setdefault(real, tree.prefix.rstrip("/") or ".")
            listed: list[tuple[str, str]] = []
            found.append(self._walk(top, tree.prefix, real, tree.skip, listed, follow=False))
            links += [(index, name, path) for name, path in listed]
        # Name order within a tree, and the links found behind a link are walked within it
        # (depth first, in name order), so the first name of a folder in name order is the
        # one it is walked under.
        for index, name, path in sorted(links):
            real = os.path.realpath(path)
            self._check(name, path, real)
            if real in self.walked:
                self.dropped.append(DroppedLink(name, self.walked[real]))
                continue
            self.walked[real] = name
            self.link = name
            found[index] += self._walk(path, name + "/", real, frozenset(), None, follow=True)
        return Walk(tuple(tuple(sorted(f)) for f in found), tuple(self.dropped))

    def _walk(
        self,
        top: str,
        prefix: str,
        real_top: str,
        skip: frozenset[str],
        links: list[tuple[str, str]] | None,
        *,
        follow: bool,
    ) -> list[tuple[str, str]]:
        """One tree from ``top`` (named ``prefix`` below the root). Not ``follow``ing: a link
        to a folder is listed in ``links`` for later, not entered. Following: a link is
        entered unless its folder was walked already; one the fence refuses raises."""
        found = []
        stack = [(top, real_top, prefix)]
        while stack:
            directory, real, here = stack.pop()
            # scandir, not os.walk and an lstat per entry: a DirEntry knows whether it is a
            # link (and a folder, unless it is a link) from the listing itself (review37).
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError:
                continue  # as os.walk: a folder that cannot be listed is left out
            self.dirs.append(Path(directory))
            subdirs, files = [], []
            for entry in entries:
                (subdirs if _is_dir(entry) else files).append(entry)
            if follow:
                self._spend(directory, len(files))
            kept = []
            for entry in sorted(subdirs, key=lambda e: e.name):
                d = entry.name
                if d in SKIP_DIRS or d.startswith(".") or here + d in skip:
                    continue
                if not entry.is_symlink():
                    real_d = os.path.join(real, d)
                elif links is not None:
                    links.append((here + d, entry.path))
                    continue
                else:
                    real_d = os.path.realpath(entry.path)
                    self._check(here + d, entry.path, real_d)
                if real_d in self.walked:
                    self.dropped.append(DroppedLink(here + d, self.walked[real_d]))
                else:
                    self.walked[real_d] = here + d
                    kept.append((entry.path, real_d, here + d + "/"))
            stack += reversed(kept)  # depth first, in name order, as os.walk went
            for entry in files:
                if entry.name.startswith("."):
                    continue
                # A link to one file is fenced as a folder link is: ~/.ssh/id_ed25519 as
                # src/key.txt would go up as Text (review36).
                if entry.is_symlink():
                    self._check(here + entry.name, entry.path, os.path.realpath(entry.path))
                found.append((here + entry.name, entry.path))
        return found

    def _check(self, name: str, path: str, target: str) -> None:
        if (why := self.fence.refusal(target)) is not None:
            raise LinkRefused(
                path,
                f"the link {name} -> {target}, {why}",
                "a link to a file or folder beside or below the project (below its parent "
                "folder or its git repository's root) or in an installed-packages folder "
                "(site-packages), through no hidden folder, to no file never uploaded "
                "(.dev.vars, .env*, .git/) and not holding the project",
                hint="link the package folder itself (ext -> ../shared/ext), the project and "
                "what it shares in a folder of their own (~/code/proj, ~/code/shared: not the "
                "home folder, nor /tmp); a link above the "
                "project would upload everything in it, one into a hidden folder (~/.aws, "
                "~/.ssh) or the system's (/proc) its secrets (docs/workers.md, Links)",
            )

    def _spend(self, path: str, files: int) -> None:
        self.spent_dirs += 1
        self.spent_files += files
        if self.spent_dirs > self.limits.dirs or self.spent_files > self.limits.files:
            raise LinkRefused(
                self.link,
                f"more than {self.limits.dirs:,} folders or {self.limits.files:,} files behind "
                f"links (at {path})",
                "a link to a package folder",
                hint="link the package itself, not a folder above it, or copy what the worker "
                "needs into python_modules/",
            )
