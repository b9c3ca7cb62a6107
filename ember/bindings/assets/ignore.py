"""``.assetsignore``: gitignore patterns for files a project's assets leave out.

As workers-shared builds it (``createAssetsIgnoreFunction``): ``/.assetsignore``,
``/_redirects`` and ``/_headers`` are always left out, then the file's own patterns; and
whatever they say, a project's secrets and state (``.dev.vars*``, ``.env*``, ``.git/``,
``.ember/``, ``node_modules/``, at any depth: ``never_uploaded``). Matching
follows gitignore: ``#`` comments, ``!`` re-includes, a trailing ``/`` matches directories only,
a pattern with a ``/`` before its end is anchored to the assets directory (else it matches at any
depth), ``*`` and ``?`` stay within one path segment, ``**`` crosses them; a file under an
ignored directory is ignored whatever later patterns say (git cannot re-include it either).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

IGNORE_FILE = ".assetsignore"
ALWAYS_IGNORED = (f"/{IGNORE_FILE}", "/_redirects", "/_headers")
# Never assets, at any depth and whatever ``.assetsignore`` says: a project's secrets, its VCS
# data, its dependencies and ember's own state. ``"assets": {"directory": "."}`` published
# ``.dev.vars`` at ``/.dev.vars``.
NEVER_DIRS = frozenset({".git", ".ember", "node_modules"})
NEVER_FILES = (".dev.vars", ".env")  # the name itself, or followed by ``.<anything>``


def never_uploaded(relative: str) -> bool:
    """True for a file (``a/b.txt``) no assets directory ever publishes (``NEVER_*``)."""
    *dirs, name = relative.split("/")
    if any(part in NEVER_DIRS for part in dirs):
        return True
    return any(name == stem or name.startswith(stem + ".") for stem in NEVER_FILES)


@dataclass(frozen=True, slots=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


class AssetsIgnore:
    """Answers whether a path relative to the assets directory (``a/b.txt``) is left out."""

    def __init__(self, patterns: list[str]) -> None:
        self._rules = [rule for line in patterns if (rule := _rule(line)) is not None]

    @classmethod
    def of(cls, directory: Path) -> AssetsIgnore:
        """The defaults plus ``directory/.assetsignore`` (if present)."""
        try:
            text = (directory / IGNORE_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        return cls([*ALWAYS_IGNORED, *text.splitlines()])

    def ignored(self, relative: str) -> bool:
        """True when ``relative`` (a file, ``/``-separated, no leading ``/``) is left out."""
        if never_uploaded(relative):
            return True
        parts = relative.split("/")
        for depth in range(1, len(parts)):
            if self._decide("/".join(parts[:depth]), is_dir=True):
                return True
        return self._decide(relative, is_dir=False)

    def ignored_dir(self, relative: str) -> bool:
        """True when the directory ``relative`` (with all it holds) is left out."""
        parts = relative.split("/")
        if any(part in NEVER_DIRS for part in parts):
            return True
        return any(
            self._decide("/".join(parts[:depth]), is_dir=True) for depth in range(1, len(parts) + 1)
        )

    def _decide(self, path: str, *, is_dir: bool) -> bool:
        ignored = False
        for rule in self._rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(path):
                ignored = not rule.negate
        return ignored


def _rule(line: str) -> _Rule | None:
    line = line.rstrip("\r")
    if line.endswith(" ") and not line.endswith("\\ "):
        line = line.rstrip(" ")
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    elif line.startswith("\\"):
        line = line[1:]  # \# or \! : the character itself
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    body = _translate(line)
    prefix = "" if anchored else "(?:.*/)?"
    return _Rule(re.compile(f"^{prefix}{body}$", re.DOTALL), negate, dir_only)


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            inner = pattern[i + 1 : end]
            if inner.startswith("!"):
                inner = "^" + inner[1:]
            out.append(f"[{inner.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        elif c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)
