"""Giving a deleted account's pages back without rewriting a whole SQLite file.

Both stores (the control plane's platform.db, the KV store's kv.sqlite3) used to run a full
``VACUUM`` after every expired temporary account: a copy of the whole file, under the store's
lock, so every tenant waited on it (15-40 s with a 1.4 GB platform.db), and any anonymous client
could cause one by letting an account expire. Now:

- **New files use ``auto_vacuum=INCREMENTAL``**, set before the first table exists (SQLite
  ignores it afterwards). Deleted pages go to the freelist; ``release_free_pages`` hands them
  back in steps of ``step`` pages, taking the store's lock for one step at a time, so the cost
  follows what was deleted, not the size of the file.
- **Files made before** have ``auto_vacuum=NONE``, which only a ``VACUUM`` can change.
  ``switch_to_incremental`` does that once, when ``ember serve`` starts and before it serves
  (nobody waits on it then); ``ember serve`` prints a line when it does.
- **Privacy is kept by ``secure_delete``** (deleted cells and freed pages are overwritten with
  zeros) and by truncating the write-ahead log after the pages are released, which drops the
  older page images it held. What a full ``VACUUM`` added was rewriting b-tree interior pages,
  which may keep a copy of a deleted index key (a KV key, a worker name) until SQLite rewrites
  that page; ``ember serve --compact`` rewrites both files before serving for an operator
  who wants that too.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from ember.storage import StorageFull, StorageHealth, full_error, is_full

INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
STEP_PAGES = 1024  # 4 MiB of 4 KiB pages a step: a few ms of the lock
VACUUM_MARGIN_BYTES = 16 * 1024 * 1024  # room left for the other store's writes meanwhile
# wal_checkpoint(TRUNCATE) tries, and the pause between them (outside the store's lock).
WAL_TRIES = 5
WAL_PAUSE_S = 0.2


@dataclass(frozen=True)
class Released:
    """What ``release_free_pages`` did: pages handed back, and whether the write-ahead log
    (which may still hold deleted rows' older page images) was emptied."""

    pages: int
    wal_truncated: bool


def enable_incremental(conn: sqlite3.Connection) -> None:
    """Ask for incremental auto-vacuum: takes effect on a file with no table yet (a new one),
    so it must run before ``journal_mode=WAL`` or any ``CREATE``."""
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")


def is_incremental(conn: sqlite3.Connection) -> bool:
    return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == INCREMENTAL


def free_pages(conn: sqlite3.Connection, lock: AbstractContextManager[object]) -> int:
    """How many free pages ``release_free_pages`` would hand back (none in a file still in
    ``auto_vacuum=NONE``)."""
    with lock:
        if not is_incremental(conn):
            return 0
        return int(conn.execute("PRAGMA freelist_count").fetchone()[0])


def release_free_pages(
    conn: sqlite3.Connection, lock: AbstractContextManager[object], step: int = STEP_PAGES
) -> Released:
    """Return the file's free pages to the file system, ``step`` pages per hold of ``lock``,
    then truncate the write-ahead log (``truncate_wal``). A file still in
    ``auto_vacuum=NONE`` keeps its free pages (reused by later writes) until it is switched."""
    released = 0
    with lock:
        incremental = is_incremental(conn)
    while incremental:
        with lock:
            free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
            if not free:
                break
            # executescript steps the pragma to completion; execute() would free one page.
            conn.executescript(f"PRAGMA incremental_vacuum({int(step)});")
            left = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        if left >= free:  # nothing moved (another reader pins the file): try next sweep
            break
        released += free - left
    return Released(released, truncate_wal(conn, lock))


def truncate_wal(
    conn: sqlite3.Connection,
    lock: AbstractContextManager[object],
    tries: int = WAL_TRIES,
    pause: float = WAL_PAUSE_S,
) -> bool:
    """Fold the write-ahead log into the file and truncate it; False if another connection
    (a reader of an older snapshot, a writer) kept it from finishing ``tries`` times. Each try
    waits on nobody (``busy_timeout`` 0): with the connection's own timeout it held the
    store's lock, and every tenant's query, for up to 10 s; the pauses are outside the lock."""
    for attempt in range(tries):
        if attempt:
            time.sleep(pause)
        with lock:
            timeout = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
            conn.execute("PRAGMA busy_timeout=0")
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.execute(f"PRAGMA busy_timeout={timeout}")
        if not busy:
            return True
    return False


def switch_to_incremental(
    conn: sqlite3.Connection,
    lock: threading.Lock | threading.RLock,
    health: StorageHealth,
    store: str,
    path: object,
    before: Callable[[], None] | None = None,
) -> bool:
    """Switch an older file to incremental auto-vacuum with its one ``VACUUM``; True if it was
    switched (False: it already was). Only while nothing is served from the file. ``before``
    runs just before the rewrite (a log line: on a large file it takes a while)."""
    with lock:
        if is_incremental(conn):
            return False
        if before is not None:
            before()
        enable_incremental(conn)
        vacuum(conn, health, store, path)
        return True


def vacuum(conn: sqlite3.Connection, health: StorageHealth, store: str, path: object) -> None:
    """A full ``VACUUM`` (a copy of the file: it needs as much room again), then the write-ahead
    log folded in and truncated. The caller holds the store's lock.

    Without room it raises ``StorageFull`` and leaves the store as it was, writable: the WAL the
    failed copy filled is truncated (it held the whole file again, which left no room for any
    write after it), and ``health`` is not marked, since no write of a client failed."""
    file = Path(str(path))
    if file.exists():
        # The copy goes to the WAL and a temporary file; a VACUUM that fills the disk half-way
        # leaves its WAL grown into the free space, where nothing else could be written.
        needed = 2 * file.stat().st_size + VACUUM_MARGIN_BYTES
        free = shutil.disk_usage(file.parent).free
        if free < needed:
            raise StorageFull(store, str(path), f"{free:,} bytes free of the {needed:,} it needs")
    try:
        conn.execute("VACUUM")
    except sqlite3.Error as exc:
        if not is_full(exc):
            raise
        with contextlib.suppress(sqlite3.Error):  # best effort: give the WAL's space back
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raise full_error(store, path, exc) from None
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
