"""The walk that finds a Worker's files: the project's own folders, then the folders its links
lead to, each real folder once, never one that holds the project.

A link to a folder (``ext -> ../shared/ext``, a package shared between projects) is walked as
a folder, its files named through the link, as Python imports them. What bounds it:

- A link whose target holds the module root, the project's root or the user's home folder
  (``up -> ..``, ``root -> /``, ``vendor -> ~``) is refused with an error: it would make a
  sibling project's files, or the whole home folder, modules that ``ember deploy`` uploads.
- Each real folder is walked once. The project's own folders are walked first, under their
  own names; a folder reached only through links is walked under the first of those names in
  name order (``ext`` before ``ext2``) and the others are left out, so two links to one folder
  are one package, and a chain of folders that each link twice to the next (a diamond) is
  walked once, not once per path through it (2^k paths for k levels).
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

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "venv"})


@dataclass(frozen=True, slots=True)
class LinkLimits:
    """How much the folders behind links may hold, all links of one walk together. A shared
    package is tens of folders; a link to a system tree is thousands."""

    dirs: int = 1_000
    files: int = 10_000


@dataclass(frozen=True, slots=True)
class Fence:
    """Real paths no folder link may lead to or above (the module root, the project's root,
    the home folder)."""

    roots: tuple[tuple[str, str], ...]  # (real path, what it is: "the project's root")

    @classmethod
    def around(cls, **paths: Path | None) -> Fence:
        """``Fence.around(module_root=..., project_root=..., home=...)``."""
        return cls(
            tuple(
                (os.path.realpath(p), what.replace("_", " "))
                for what, p in paths.items()
                if p is not None
            )
        )

    def holding(self, target: str) -> str | None:
        """What fenced path ``target`` holds (is, or is a folder above), if any."""
        outer = target.rstrip(os.sep) + os.sep
        return next(
            (f"{what} ({r})" for r, what in self.roots if r == target or r.startswith(outer)),
            None,
        )


def walk_files(
    root: Path,
    dirs: list[Path],
    fence: Fence,
    skip: frozenset[str] = frozenset(),
    limits: LinkLimits = LinkLimits(),
) -> list[tuple[str, str]]:
    """Every file under ``root`` but the skipped ones, as (``/``-separated name, path), sorted
    by name (not yet known to be regular files); the folders walked are added to ``dirs``.
    ``skip``: folders left out, by ``/``-separated path below ``root``. Raises ConfigError for
    a link that leads to a fenced path, or past ``limits``.
    Strings, not Paths: a Path per file was most of a watch poll's cost."""
    top = str(root)
    walked: set[str] = set()
    links: list[tuple[str, str]] = []
    found = _walk(top, "", os.path.realpath(top), dirs, skip, walked, links, follow=False)
    budget = _Budget(limits)
    # Name order, and the links found behind a link are walked within it (depth first, in
    # name order), so the first name of a folder in name order is the one it is walked under.
    for name, path in sorted(links):
        real = os.path.realpath(path)
        if (held := fence.holding(real)) is not None:
            raise _fenced(name, path, real, held)
        if real in walked:
            continue  # already walked under its own name, or an earlier link's
        walked.add(real)
        budget.link = name
        found += _walk(path, name + "/", real, dirs, skip, walked, None, fence, budget)
    return sorted(found)


class _Budget:
    """What the links' folders may still hold; ``link``: the one being walked."""

    def __init__(self, limits: LinkLimits) -> None:
        self.limits = limits
        self.dirs = 0
        self.files = 0
        self.link = ""

    def spend(self, path: str, files: int) -> None:
        self.dirs += 1
        self.files += files
        if self.dirs > self.limits.dirs or self.files > self.limits.files:
            raise ConfigError(
                self.link,
                None,
                f"more than {self.limits.dirs:,} folders or {self.limits.files:,} files behind "
                f"links (at {path})",
                "a link to a package folder",
                hint="link the package itself, not a folder above it, or copy what the worker "
                "needs into python_modules/",
            )


def _walk(
    top: str,
    prefix: str,
    real_top: str,
    dirs: list[Path],
    skip: frozenset[str],
    walked: set[str],
    links: list[tuple[str, str]] | None,
    fence: Fence | None = None,
    budget: _Budget | None = None,
    *,
    follow: bool = True,
) -> list[tuple[str, str]]:
    """One tree from ``top`` (named ``prefix`` below the root). Not ``follow``ing: a link to a
    folder is listed in ``links`` for later, not entered. Following: a link is entered unless
    its folder was walked already; one that leads to a fenced path raises."""
    found = []
    reals = {top: real_top}
    walked.add(real_top)
    for directory, subdirs, files in os.walk(top, followlinks=follow):
        real = reals.pop(directory)
        dirs.append(Path(directory))
        relative = os.path.relpath(directory, top).replace(os.sep, "/")
        here = prefix if relative == "." else prefix + relative + "/"
        if budget is not None:
            budget.spend(directory, len(files))
        kept = []
        for d in sorted(subdirs):
            if d in SKIP_DIRS or d.startswith(".") or here + d in skip:
                continue
            path = os.path.join(directory, d)
            # An lstat per folder (not per file): only a link has another real path.
            if not os.path.islink(path):
                real_d = os.path.join(real, d)
            elif links is not None:
                links.append((here + d, path))
                continue
            else:
                real_d = os.path.realpath(path)
                if fence is not None and (held := fence.holding(real_d)) is not None:
                    raise _fenced(here + d, path, real_d, held)
            if real_d not in walked:
                walked.add(real_d)
                kept.append(d)
                reals[path] = real_d
        subdirs[:] = kept
        found.extend(
            (here + name, os.path.join(directory, name))
            for name in files
            if not name.startswith(".")
        )
    return found


def _fenced(name: str, path: str, target: str, held: str) -> ConfigError:
    return ConfigError(
        path,
        None,
        f"the link {name} -> {target}, a folder that holds the {held}",
        "a link to a folder beside or below the project that does not hold it",
        hint="link the package folder itself (ext -> ../shared/ext); a link to a folder above "
        "the project would upload everything in it",
    )
