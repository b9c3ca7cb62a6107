"""What all temporary accounts' static assets take of their shared pool, as a running total.

Every session start of a temporary account checks the pool (``temporary_total.py``): summing
each temporary account's files and sessions there made one start cost as much as all of them
together. Instead the files' bytes of each temporary account (listed and scanned once, at the
first check) and what their open sessions still expect are kept as totals, moved by each
upload, sweep, session start and end (``AssetStore``); a claimed or deleted account leaves.
``AssetStore.stored_bytes`` recounts from scratch: the slow reference the tests compare with.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable


class TemporaryPool:
    """The temporary accounts' asset bytes; its lock is taken last, with nothing called under
    it, so any caller may hold its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loading = threading.Lock()
        self._files: dict[str, int] | None = None  # account -> its files' bytes; None: unlisted
        self._files_total = 0
        self._pending = 0

    def total(self, ids: Callable[[], Iterable[str]], stored: Callable[[str], int]) -> int:
        """Files and pending bytes of every temporary account; the first call lists them
        (``ids``) and counts each one's files (``stored``)."""
        if self._files is None:
            with self._loading:
                if self._files is None:
                    loaded = {account_id: stored(account_id) for account_id in ids()}
                    with self._lock:
                        self._files = loaded
                        self._files_total = sum(loaded.values())
        with self._lock:
            return self._files_total + self._pending

    def files(self, account_id: str) -> int | None:
        """The bytes the pool counts for the account's files; None if it is not counted."""
        with self._lock:
            return None if self._files is None else self._files.get(account_id)

    def join(self, account_id: str, stored: int) -> None:
        """A temporary account's files (``stored`` bytes) count from now, if not already."""
        with self._lock:
            if self._files is not None and account_id not in self._files:
                self._files[account_id] = stored
                self._files_total += stored

    def add_files(self, account_id: str, delta: int) -> None:
        with self._lock:
            if self._files is not None and account_id in self._files:
                self._files[account_id] += delta
                self._files_total += delta

    def add_pending(self, delta: int) -> None:
        with self._lock:
            self._pending += delta

    def leave(self, account_id: str) -> None:
        """The account's files count no more (claimed or deleted)."""
        with self._lock:
            if self._files is not None:
                self._files_total -= self._files.pop(account_id, 0)
