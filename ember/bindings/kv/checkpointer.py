"""``Checkpointer``: folds the KV store's write-ahead log into its file on a thread of its own.

Every KV write is appended to the write-ahead log and flushed there (WAL, ``synchronous=FULL``);
a checkpoint later copies the logged pages into the database file and flushes that. SQLite runs
one by itself at the end of the commit that takes the log past 1000 pages, on the committing
connection: the store's one writer, so a 24 MB value's commit also copied 24 MB into the file
and flushed it while every other account's write waited (a fifth to a quarter of its time,
measured). Here the writer's connection checkpoints only as a safety net (``WRITER_PAGES``),
and this thread, with its own connection, runs a PASSIVE checkpoint once ``DUE_BYTES`` were
written since the last: SQLite lets it run beside the writer's transactions (it copies only
committed pages, never waits for a lock), so the next write starts as soon as the last one
committed. The price: under a steady flood of large values the log grows to ``WRITER_PAGES``
before it starts over (a checkpoint rarely ends between two of the writer's transactions).

Durability does not depend on it: a write is acknowledged after its commit flushed the log, and
a crash mid-checkpoint is redone from the log at the next open. A checkpoint that fails (the
disk, a lock) is logged and left to the next one, or to the writer's safety net.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

# SQLite's own default: a checkpoint once the log grew by about this much (1000 4 KiB pages).
DUE_BYTES = 4 * 1000 * 1024
# The writer's ``wal_autocheckpoint`` (64 MiB): reached when this thread cannot keep up, as under
# a flood of large values, where the writer starts its next transaction before a checkpoint of
# the last one ended, so the log cannot restart from its beginning; there the log grows to this
# bound, most of it already copied (the writer's checkpoint then copies only the rest).
WRITER_PAGES = 16_384
log = logging.getLogger("ember.kv")


class Checkpointer:
    """A thread with its own connection to ``path``, checkpointing when writes ask for it."""

    def __init__(self, path: Path, thread_name: str = "ember-kv-checkpoint") -> None:
        self._path = path
        self._thread_name = thread_name
        self.lock = threading.Lock()  # held for each checkpoint: hold it to hold them off
        self._cond = threading.Condition()
        self._written = 0  # bytes written since the last checkpoint was asked for
        self._due = False  # asked for, not yet begun
        self._running = False
        self._thread: threading.Thread | None = None
        self._closed = False

    def wrote(self, size: int) -> None:
        """``size`` bytes were committed: ask for a checkpoint once ``DUE_BYTES`` were."""
        with self._cond:
            self._written += size
            if self._written < DUE_BYTES or self._closed:
                return
            self._written = 0
            self._due = True
            if self._thread is None:  # started on first need: most stores never reach it
                self._thread = threading.Thread(
                    target=self._serve, name=self._thread_name, daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def started(self) -> bool:
        with self._cond:
            return self._thread is not None

    def wait(self) -> None:
        """Return once no checkpoint is asked for or running (tests, diagnostics)."""
        with self._cond:
            while (self._due or self._running) and self._thread is not None:
                if not self._thread.is_alive():
                    return
                self._cond.wait(1.0)  # re-checks that the thread still lives

    def close(self) -> None:
        """Stop the thread (after a checkpoint in progress) and close its connection."""
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join()

    def _serve(self) -> None:
        try:
            db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            log.warning("the KV store's checkpointer cannot open %s: %s", self._path, exc)
            return
        try:
            db.execute("PRAGMA busy_timeout=0")  # never wait: a busy checkpoint is retried later
            while True:
                with self._cond:
                    while not self._due and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    self._due, self._running = False, True  # writes meanwhile ask again
                try:
                    with self.lock:
                        self._checkpoint(db)
                finally:
                    with self._cond:
                        self._running = False
                        self._cond.notify_all()
        finally:
            db.close()

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # left to the next one, or to the writer's safety net
            log.warning("checkpointing the KV store %s failed: %s", self._path, exc)
