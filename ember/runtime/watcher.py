"""Polling file watcher for ``ember dev``: the files a scan lists, by mtime, size and inode.

What is watched is the caller's ``scan`` (``dev_watch.py``: the worker's modules, the config
and secrets files, the directories walked for the modules), re-run at each ``changes()``: a
file the scan does not list is never looked at, however often it is written (a log file
redirected into the project). Polling (every ``interval`` seconds) needs no extra dependency
and behaves the same on every filesystem.
``stale()`` is the cheap question asked before each request (``reload_gate.py``): a stat of
each file and directory listed at the last scan, no directory listing. A directory's own mtime
changes when an entry is added, removed or renamed in it, so a new file is noticed there too.
``due()`` is the poll's question: ``stale()``, or a directory whose mtime is too recent to
trust. A directory's mtime comes from the kernel's coarse clock (a tick, up to 10 ms) and is
stat'ed after it was listed: a file added in the same tick as the scan, or between its listing
and its stat, leaves it unchanged. So until a scan starts ``RACY_NS`` after a directory's last
change, the poll rescans (git's "racily clean" index entries, the same cure); otherwise it walks
nothing while nothing moves (a 50k-file tree took 0.5 s a scan, every poll).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# What a path's stat is compared by: mtime, size and inode (an editor that saves by writing a
# new file and renaming it over the old one changes the inode even within one mtime tick).
Key = tuple[int, int, int]
Snapshot = dict[Path, Key]
# How long after a directory's last change its mtime is not trusted to show the next one: the
# kernel's timestamp tick (<= 10 ms) and FAT's 2 s mtime resolution.
RACY_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class WatchList:
    """What one scan found to watch."""

    files: tuple[Path, ...]  # watched by path: one that does not exist yet is seen when made
    dirs: tuple[Path, ...] = ()  # an entry added, removed or renamed in one makes ``stale()``


Scan = Callable[[], WatchList]


class FileWatcher:
    """Tells which of the files ``scan`` lists changed since it last looked."""

    def __init__(self, scan: Scan) -> None:
        self._scan = scan
        self._files: tuple[Path, ...] = ()
        self._snapshot: Snapshot = {}
        self._dirs: Snapshot = {}
        self._checks: list[tuple[str, Key | None]] = []
        self._racy = False  # a directory changed too recently for its mtime to be trusted
        self._take(scan, keep=False)

    def _take(self, scan: Scan, *, keep: bool) -> None:
        """Watch what ``scan`` lists from now on; ``keep``: a path already watched keeps the
        state it was last reported in (so a change not yet reported still is)."""
        started = time.time_ns()  # before the walk: a change during it counts as recent
        listing = scan()
        old, old_dirs = (self._snapshot, self._dirs) if keep else ({}, {})
        self._files = listing.files
        self._snapshot = {p: k for p in listing.files if (k := old.get(p) or _key(p)) is not None}
        self._dirs = {p: k for p in listing.dirs if (k := old_dirs.get(p) or _key(p)) is not None}
        self._checks = self._checklist()
        self._racy = any(key[0] >= started - RACY_NS for key in self._dirs.values())

    def rescope(self, scan: Scan) -> None:
        """Watch what ``scan`` lists from now on (the config, and with it the module rules,
        changed). Call it before reading the files it lists: a file it adds is taken as it is
        now, so an edit made after this call is a change and one made before it is read."""
        self._scan = scan
        self._take(scan, keep=True)

    def snapshot(self) -> Snapshot:
        """mtime, size and inode of every watched file (as of the last scan)."""
        return dict(self._snapshot)

    def _checklist(self) -> list[tuple[str, Key | None]]:
        # Plain strings and tuples, made once per scan: stale() runs before each request.
        paths = {**self._dirs, **self._snapshot}
        # A missing file in a watched directory is seen by the directory's mtime when it is
        # made: a failed stat costs several times a good one, and there are a dozen of them
        # (the config and dotenv names ember dev looks for).
        absent = [
            (str(p), None)
            for p in self._files
            if p not in self._snapshot and p.parent not in self._dirs
        ]
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

    def due(self) -> bool:
        """Whether a ``changes()`` now could find something: ``stale()``, or a directory whose
        mtime is too recent to show every entry added to it (the module docstring)."""
        return self._racy or self.stale()

    def changes(self) -> list[Path]:
        """Watched paths added, removed or modified since the last call."""
        before = self._snapshot
        self._take(self._scan, keep=False)
        current = self._snapshot
        changed = [p for p in current.keys() | before.keys() if current.get(p) != before.get(p)]
        return sorted(changed)


def _key(path: Path) -> Key | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)
