"""Polling file watcher for ``ember dev``: the project's files and its config, by mtime and size.

Polling (every ``interval`` seconds) needs no extra dependency and behaves the same on every
filesystem; for a project of a few hundred files it costs well under a millisecond per poll.
``stale()`` is the cheap question asked before each request (``reload_gate.py``): a stat of
each file and directory seen at the last walk, no directory listing. A directory's own mtime
changes when an entry is added, removed or renamed in it, so a new file is noticed there too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ember.runtime.deployment import project_tree

# What a path's stat is compared by: mtime, size and inode (an editor that saves by writing a
# new file and renaming it over the old one changes the inode even within one mtime tick).
Key = tuple[int, int, int]
Snapshot = dict[Path, Key]


class FileWatcher:
    """Tells which files under ``root`` (or ``extra``) changed since it last looked."""

    def __init__(
        self, root: Path, *, extra: Iterable[Path] = (), exclude: Iterable[Path] = ()
    ) -> None:
        self.root = root
        self.extra = tuple(extra)
        # Directories whose changes need no reload (static assets, read live per request).
        self.exclude = tuple(exclude)
        self._snapshot, self._dirs = self._walk()
        self._checks = self._checklist()

    def snapshot(self) -> Snapshot:
        """mtime, size and inode of every watched file."""
        return self._walk()[0]

    def _walk(self) -> tuple[Snapshot, Snapshot]:
        dirs, files = project_tree(self.root)
        if self.exclude:
            dirs = [d for d in dirs if not _under(d, self.exclude)]
            files = [f for f in files if not _under(f, self.exclude)]
        state: Snapshot = {}
        for path in [*files, *self.extra]:
            key = _key(path)
            if key is not None:
                state[path] = key
        # The extra files are watched by path: one created later is noticed by its own stat.
        watched_dirs = {path: key for path in dirs if (key := _key(path)) is not None}
        return state, watched_dirs

    def _checklist(self) -> list[tuple[str, Key | None]]:
        # Plain strings and tuples, made once per walk: stale() runs before each request.
        paths = {**self._dirs, **self._snapshot}
        absent = [(str(p), None) for p in self.extra if p not in self._snapshot]
        return [*((str(p), key) for p, key in paths.items()), *absent]

    def stale(self) -> bool:
        """Whether anything may have changed since the last ``changes()`` (stat calls only)."""
        stat = os.stat
        for path, key in self._checks:
            try:
                st = stat(path)
            except OSError:
                if key is not None:
                    return True
                continue
            if key is None or (st.st_mtime_ns, st.st_size, st.st_ino) != key:
                return True
        return False

    def changes(self) -> list[Path]:
        """Paths added, removed or modified since the last call."""
        current, self._dirs = self._walk()
        changed = [
            p
            for p in current.keys() | self._snapshot.keys()
            if current.get(p) != self._snapshot.get(p)
        ]
        self._snapshot = current
        self._checks = self._checklist()
        return sorted(changed)


def _under(path: Path, parents: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(parent) for parent in parents)


def _key(path: Path) -> Key | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)
