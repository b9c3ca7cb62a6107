"""Writes the disk has no room for: one error for every store, one log line, and a health record.

SQLite answers SQLITE_FULL ("database or disk is full") when the file system (or the store's
``max_page_count``) is full, and a plain file write fails with ENOSPC (EDQUOT past a quota).
Either way the write did not happen: SQLite rolled the transaction back, and the file writers
remove what they had begun. ``StorageFull`` says so to the user in words that do not leak the
platform's paths; ``StorageHealth`` prints one line for the operator (no traceback: the cause is
known, and it is not a bug) and remembers, per store, that writes fail until one succeeds again,
which ``ember serve``'s ``/health`` reports.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ember.errors import InternalError

log = logging.getLogger("ember.storage")
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
USER_MESSAGE = "the platform's storage is full: nothing was written; try again later"


class StorageFull(InternalError):
    """A write failed for want of space; nothing was written. ``store`` names the store for the
    operator ("KV store"), ``path`` its file (the operator's log only), ``cause`` the OS's or
    SQLite's words. Answered with HTTP 507 Insufficient Storage (RFC 4918: the server cannot
    store what the request needs), a 5xx that clients such as wrangler retry."""

    http_status = 507

    def __init__(self, store: str, path: str, cause: str) -> None:
        self.store = store
        self.path = path
        self.cause = cause
        super().__init__(USER_MESSAGE)

    def operator_line(self) -> str:
        return (
            f"[ember] storage full: a write to the {self.store} ({self.path}) failed: "
            f"{self.cause}; nothing was written. Writes fail until space is freed on its disk "
            "(GET /health says which store, since when)"
        )


def is_full(exc: BaseException) -> bool:
    """True for SQLite's SQLITE_FULL and the OS's ENOSPC / EDQUOT."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def full_error(store: str, path: object, exc: BaseException) -> StorageFull:
    cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StorageFull(store, str(path), cause)


@contextmanager
def write_transaction(
    conn: sqlite3.Connection, health: StorageHealth, store: str, path: object
) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction on ``conn`` (opened with ``isolation_level=None``,
    so sqlite3 opens none itself): committed on normal exit, rolled back on error, and a full
    disk is ``StorageFull`` recorded in ``health`` (a success clears the store's record). The
    caller holds whatever lock serialises the connection's writers."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLITE_FULL may have rolled it back already
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        if not is_full(exc):
            raise
        raise health.failed(full_error(store, path, exc)) from None
    health.wrote(store)


@dataclass(slots=True)
class StorageFailure:
    """A store whose writes fail: since when, the last time, how many, and why."""

    store: str
    error: str
    since: float
    last: float
    failed_writes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "error": self.error,
            "since": _iso(self.since),
            "last": _iso(self.last),
            "failed_writes": self.failed_writes,
        }


class StorageHealth:
    """Failing stores, each until a write of it succeeds. ``say`` prints the operator's line
    (``ember serve``'s log; the ``ember.storage`` logger elsewhere)."""

    def __init__(
        self,
        say: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._say = say or log.error
        self._clock = clock
        self._failing: dict[str, StorageFailure] = {}
        self._lock = threading.Lock()  # stores write from their own threads

    def failed(self, error: StorageFull) -> StorageFull:
        """Record and print ``error``; returns it for the caller to raise."""
        now = self._clock()
        with self._lock:
            known = self._failing.get(error.store)
            if known is None:
                self._failing[error.store] = StorageFailure(error.store, error.cause, now, now, 1)
            else:
                known.last, known.error = now, error.cause
                known.failed_writes += 1
        self._say(error.operator_line())
        return error

    def wrote(self, store: str) -> None:
        """A write of ``store`` succeeded: it has room again."""
        if store not in self._failing:  # the common case: no lock taken
            return
        with self._lock:
            recovered = self._failing.pop(store, None) is not None
        if recovered:
            self._say(f"[ember] storage: writes to the {store} succeed again")

    def failures(self) -> list[StorageFailure]:
        with self._lock:
            return sorted(self._failing.values(), key=lambda failure: failure.since)

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            failing = sorted(self._failing.values(), key=lambda failure: failure.since)
            return {"failures": [failure.to_dict() for failure in failing]}


def _iso(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )
