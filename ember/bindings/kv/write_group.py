"""Group commit: the KV writes queued together, applied in one transaction and one flush.

A mixin of ``KVStore`` (as ``reader.KeyReader`` is). Each write transaction ends in an fsync of
the write-ahead log (``synchronous=FULL``, so an acknowledged write survives kill -9), and under
many concurrent writers those flushes are the store's whole cost. The writer thread
(``fair_writer.py``) hands ``apply_group`` the writes that are queued when it turns to them, in
the order it would have run them one by one; they are applied in that order in one transaction,
each inside a SAVEPOINT, so a write that is refused (over its account's quota, its namespace
gone) rolls back alone and its batch-mates go on. Nobody is acknowledged before the COMMIT
returns. A failure of the database itself (a full disk, an I/O error) may have rolled back the
whole transaction: then ``apply_group`` raises, nothing of the group is committed, and the
caller runs each write on its own (``apply``, the one-at-a-time path), so each gets its own
outcome. ``apply`` is the reference: a test holds ``apply_group`` to it on random workloads.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from ember.bindings.kv.checkpointer import Checkpointer
from ember.bindings.kv.records import KVWriteOp

SAVEPOINT = "kv_write"


class WriteGroups:
    """``apply`` one write, or ``apply_group`` several in one transaction."""

    # Set by KVStore; used here.
    _db: sqlite3.Connection
    _lock: threading.Lock

    checkpoints: Checkpointer
    _transaction: Callable[[], AbstractContextManager[None]]
    _apply_locked: Callable[[KVWriteOp], None]

    def apply(self, op: KVWriteOp) -> None:
        """Apply ``op`` in a transaction of its own; returns after its commit (durable)."""
        with self._lock, self._transaction():
            self._apply_locked(op)
        self.checkpoints.wrote(op.size())

    def apply_group(self, ops: Sequence[KVWriteOp]) -> list[BaseException | None]:
        """Apply ``ops`` in order in one transaction; returns, after its commit, each one's
        outcome: None (written) or the error that refused it (nothing of it written). Raises
        (nothing committed) when the database failed: run each with ``apply`` then."""
        outcomes: list[BaseException | None] = []
        with self._lock, self._transaction():
            for op in ops:
                outcomes.append(self._apply_saved(op))
        self.checkpoints.wrote(sum(op.size() for op in ops))
        return outcomes

    def _apply_saved(self, op: KVWriteOp) -> BaseException | None:
        self._db.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            self._apply_locked(op)
        except sqlite3.Error:
            raise  # the database's own failure: the whole group rolls back
        except Exception as exc:  # this write's refusal: undo it alone, keep the group
            self._db.execute(f"ROLLBACK TO {SAVEPOINT}")
            self._db.execute(f"RELEASE {SAVEPOINT}")
            return exc
        self._db.execute(f"RELEASE {SAVEPOINT}")
        return None
