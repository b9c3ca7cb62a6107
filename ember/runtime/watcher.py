"""Polling file watcher for ``ember dev``: the files a scan lists, by mtime, ctime, size, inode.

What is watched is the caller's ``scan`` (``dev_watch.py``: the worker's modules, the config
and secrets files, the directories walked for the modules), re-run at each ``changes()``: a
file the scan does not list is never looked at, however often it is written (a log file
redirected into the project). Polling (every ``interval`` seconds) needs no extra dependency
and behaves the same on every filesystem.
``stale()`` is the cheap question asked before each request (``reload_gate.py``): a stat of
each file and directory listed at the last scan, no directory listing. A directory's own mtime
changes when an entry is added, removed or renamed in it, so a new file is noticed there too.
``due()`` is the poll's question: ``stale()``, or a directory whose mtime is too recent to
trust. A directory's mtime comes from the kernel's coarse clock and is stat'ed after it was
listed: a file added in the same tick as the scan, or between its listing and its stat, leaves
it unchanged. So while a directory's stat is racy (``racy.py``: git's "racily clean" entries)
the poll rescans; otherwise it walks nothing while nothing moves (a 50k-file tree took 0.5 s a
scan, every poll). A racy file (a same-size save in the same tick leaves its whole stat as it
was) is compared by content instead, by each poll, and by ``stale()`` for the newest few up
to REQUEST_READ_MAX bytes (a request does not read a big Data module just written, nor each of
the files a checkout just wrote), until its stat is trusted:
the file is read again, the tree is not walked.
Racy ends ``RACY_NS`` after the mtime or after the stat was first seen, whichever comes first:
a tree dated in the future (tar, rsync, a mount whose clock runs ahead) is trusted after one
window, where waiting for its mtime to fall behind now walked it every poll for good.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.runtime.racy import RACY_NS, digest, racy

__all__ = ["RACY_NS", "FileWatcher", "Key", "Scan", "Snapshot", "WatchList"]

# What a path's stat is compared by: mtime, ctime, size and inode (an editor that saves by
# writing a new file and renaming it over the old one changes the inode even within one mtime
# tick; ``touch -r`` or ``rsync -t`` put the old mtime back on new content, not the ctime).
Key = tuple[int, int, int, int]
Snapshot = dict[Path, Key]
# One entry of ``stale()``'s list: a path, its key (None: absent), its content digest (racy).
Check = tuple[str, Key | None, bytes | None]
# The largest racy file a request reads (``stale()``); larger ones are left to the poll. An
# edited source file is far smaller; a Data module just written (a 64 MiB python_modules/
# blob) cost a request 0.2 s per look for the whole racy window.
REQUEST_READ_MAX = 64 * 1024
# The most racy files a request reads, newest mtime first (the one just saved is among them);
# after a checkout of 3,000 files every request read all 3,000 for the racy window.
REQUEST_READS = 64


@dataclass(frozen=True, slots=True)
class WatchList:
    """What one scan found to watch."""

    files: tuple[Path, ...]  # watched by path: one that does not exist yet is seen when made
    dirs: tuple[Path, ...] = ()  # an entry added, removed or renamed in one makes ``stale()``


Scan = Callable[[], WatchList]


class FileWatcher:
    """Tells which of the files ``scan`` lists changed since it last looked. ``clock`` (ns
    since the epoch, the clock file times are in) and ``stat`` are the system's by default."""

    def __init__(
        self,
        scan: Scan,
        *,
        clock: Callable[[], int] = time.time_ns,
        stat: Callable[[str], os.stat_result] = os.stat,
    ) -> None:
        self._clock = clock
        self._stat = stat
        self._scan = scan
        self._files: tuple[Path, ...] = ()
        self._snapshot: Snapshot = {}
        self._dirs: Snapshot = {}
        self._seen: dict[Path, int] = {}  # when each path's key was first seen as it is
        self._digests: dict[Path, bytes] = {}  # the racy files' contents
        self._checks: list[Check] = []  # a request's: big racy files only stat'ed
        self._poll_checks: list[Check] = []  # the poll's: every racy file read
        self._racy_dirs = False  # a directory's stat may not show an entry added to it yet
        self._take(scan, keep=False)

    def _take(self, scan: Scan, *, keep: bool) -> set[Path]:
        """Watch what ``scan`` lists from now on; ``keep``: a path already watched keeps the
        state it was last reported in (so a change not yet reported still is). Returns the
        files whose content changed under an unchanged stat (racy ones, read again)."""
        started = self._clock()  # before the walk: a change during it counts as recent
        listing = scan()
        before, before_dirs, before_digests = self._snapshot, self._dirs, self._digests
        old, old_dirs = (before, before_dirs) if keep else ({}, {})
        key = self._key
        files = {p: k for p in listing.files if (k := old.get(p) or key(p)) is not None}
        dirs = {p: k for p in listing.dirs if (k := old_dirs.get(p) or key(p)) is not None}
        finished = self._clock()
        known = {**before_dirs, **before}
        seen = {
            p: self._seen.get(p, finished) if known.get(p) == k else finished
            for p, k in {**dirs, **files}.items()
        }
        digests: dict[Path, bytes] = {}
        rewritten: set[Path] = set()
        for path, k in files.items():
            was = before_digests.get(path) if before.get(path) == k else None
            if keep and was is not None:
                digests[path] = was  # as last reported: the next changes() compares it
                continue
            still_racy = racy(k[0], seen[path], started)
            if was is None and not still_racy:
                continue  # trusted: its stat shows any change
            # Read after the stat: a save after this read gets a new stat once past the window.
            content = digest(str(path))
            if was is not None and content != was:
                rewritten.add(path)
            if still_racy and content is not None:
                digests[path] = content
        self._files, self._snapshot, self._dirs = listing.files, files, dirs
        self._seen, self._digests = seen, digests
        self._checks, self._poll_checks = self._checklists()
        self._racy_dirs = any(racy(k[0], seen[p], started) for p, k in dirs.items())
        return rewritten

    def rescope(self, scan: Scan) -> None:
        """Watch what ``scan`` lists from now on (the config, and with it the module rules,
        changed). Call it before reading the files it lists: a file it adds is taken as it is
        now, so an edit made after this call is a change and one made before it is read."""
        self._scan = scan
        self._take(scan, keep=True)

    def snapshot(self) -> Snapshot:
        """mtime, ctime, size and inode of every watched file (as of the last scan)."""
        return dict(self._snapshot)

    def _checklists(self) -> tuple[list[Check], list[Check]]:
        """A request's checks and the poll's: the same paths, but a request reads only the
        REQUEST_READS newest racy files up to REQUEST_READ_MAX bytes."""
        # Plain strings and tuples, made once per scan: stale() runs before each request.
        digests = self._digests
        checks: list[Check] = [(str(p), k, None) for p, k in self._dirs.items()]
        checks += [(str(p), k, digests.get(p)) for p, k in self._snapshot.items()]
        # A missing file in a watched directory is seen by the directory's mtime when it is
        # made: a failed stat costs several times a good one, and there are a dozen of them
        # (the config and dotenv names ember dev looks for).
        checks += [
            (str(p), None, None)
            for p in self._files
            if p not in self._snapshot and p.parent not in self._dirs
        ]
        small = [(k[0], p) for p, k, d in checks if d and k and k[2] <= REQUEST_READ_MAX]
        read = {p for _, p in sorted(small, reverse=True)[:REQUEST_READS]}
        request = [(p, k, d if p in read else None) for p, k, d in checks]
        return request, checks

    def stale(self) -> bool:
        """Whether anything may have changed since the last ``changes()`` (a stat of each
        watched path, and a read of each small racy file: a request's question, answered
        without reading a big file; the poll reads those)."""
        return self._stale(self._checks)

    def _stale(self, checks: list[Check]) -> bool:
        stat = self._stat
        for path, key, content in checks:
            try:
                st = stat(path)
            except OSError:
                if key is not None:
                    return True
                continue
            if key is None or (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino) != key:
                return True
            if content is not None and digest(path) != content:
                return True
        return False

    def due(self) -> bool:
        """Whether a ``changes()`` now could find something: ``stale()``, or a directory whose
        stat is too recent to show every entry added to it (the module docstring)."""
        now = self._clock()
        if self._racy_dirs or self._stale(self._poll_checks):
            return True
        # Each racy file has just been read, after ``now``, and found as it was: those whose
        # stat is trusted as of ``now`` need no more reading, by the poll or by requests.
        trusted = [p for p in self._digests if not racy(self._snapshot[p][0], self._seen[p], now)]
        if trusted:
            self._digests = {p: d for p, d in self._digests.items() if p not in trusted}
            self._checks, self._poll_checks = self._checklists()
        return False

    def changes(self) -> list[Path]:
        """Watched paths added, removed or modified since the last call."""
        before = self._snapshot
        rewritten = self._take(self._scan, keep=False)
        current = self._snapshot
        changed = {p for p in current.keys() | before.keys() if current.get(p) != before.get(p)}
        return sorted(changed | rewritten)

    def _key(self, path: Path) -> Key | None:
        try:
            st = self._stat(str(path))
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
