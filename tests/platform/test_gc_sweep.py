"""The expiry sweep: deletes an account in bounded batches, never rewrites a whole database.

A full ``VACUUM`` per expired account rewrote platform.db and kv.sqlite3 under their locks,
so one anonymous account's expiry stopped every tenant for as long as the files took to copy.
Here each transaction of the sweep deletes at most a batch of rows (and bytes), and the freed
pages go back to the file system in small ``incremental_vacuum`` steps.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.gc import GarbageCollector, SweepBatch, SweepStopped
from ember.runtime.deployments.multipart import Part
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import SecretValue
from tests.platform.test_store import CONFIG, temporary, upload

BATCH = SweepBatch(rows=10, bytes=8 * 1024, pages=16)
MODULES = 60
KEYS = 200


@pytest.fixture
def plane(tmp_path: Path) -> ControlPlane:
    plane = ControlPlane(tmp_path / "state", CONFIG, clock=ManualClock())
    plane.gc = GarbageCollector(plane.db, plane.files, plane.namespaces, plane.clock, batch=BATCH)
    yield plane
    plane.close()


def _transactions(statements: list[str]) -> list[list[str]]:
    """The traced statements grouped by write transaction (BEGIN IMMEDIATE ... COMMIT)."""
    groups: list[list[str]] = []
    current: list[str] | None = None
    for statement in statements:
        if statement.startswith("BEGIN"):
            current = []
        elif statement in ("COMMIT", "ROLLBACK") and current is not None:
            groups.append(current)
            current = None
        elif current is not None:
            current.append(statement)
    return groups


def _expired_account_with_many_rows(plane: ControlPlane) -> str:
    account = temporary(plane).account
    namespace = plane.namespaces.create(account, "many")
    extra = [Part(f"m{i}.py", f"m{i}.py", "text/x-python", b"#" * 20) for i in range(MODULES)]
    # CONFIG caps a temporary account's script at 2000 bytes: 61 small modules fit.
    plane.scripts.upload(account, "w", upload(extra_parts=extra), deploy=True, source="api")
    plane.secrets.put(account, "w", SecretValue("S", "secret_text", "v"), "api")
    store = plane.namespaces.data
    for i in range(KEYS):
        store.put(namespace.id, f"key-{i:04d}", b"v" * (3000 if i < 10 else 10))
    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)
    return account.id


def test_sweep_deletes_in_bounded_batches_and_runs_no_vacuum(plane: ControlPlane) -> None:
    account_id = _expired_account_with_many_rows(plane)
    control: list[str] = []
    kv: list[str] = []
    plane.db._conn.set_trace_callback(control.append)  # noqa: SLF001 - the real statements
    plane.namespaces.data._db.set_trace_callback(kv.append)  # noqa: SLF001

    assert plane.gc.collect().accounts_deleted == (account_id,)

    for statement in control + kv:
        assert not re.match(r"\s*VACUUM\b", statement, re.IGNORECASE), statement
    module_batches = [
        sum(s.startswith("DELETE FROM modules") for s in group) for group in _transactions(control)
    ]
    # Two versions of 61 modules each (upload, then the secret's copy), 10 rows a transaction.
    assert max(module_batches) <= BATCH.rows
    assert sum(n > 0 for n in module_batches) >= 2 * (MODULES + 1) // BATCH.rows
    kv_batches = [sum(s.startswith("DELETE FROM kv") for s in g) for g in _transactions(kv)]
    assert max(kv_batches) <= BATCH.rows
    # 3000-byte values with an 8 KiB byte bound: at most 2 of them a transaction.
    assert sum(n > 0 for n in kv_batches) >= KEYS // BATCH.rows + 10 // 2 - 1
    with plane.db.reader() as conn:
        for table in ("accounts", "scripts", "versions", "modules", "version_secrets"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table


def test_sweep_returns_the_freed_pages_to_the_file_system(plane: ControlPlane) -> None:
    _expired_account_with_many_rows(plane)
    paths = (plane.db.path, plane.namespaces.data.path)
    for path in paths:  # a new state directory frees pages incrementally
        with sqlite3.connect(path) as probe:
            assert probe.execute("PRAGMA auto_vacuum").fetchone()[0] == 2, path  # INCREMENTAL
    for path in paths:  # the account's pages into the file itself, to measure them
        with sqlite3.connect(path) as probe:
            probe.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = [path.stat().st_size for path in paths]
    plane.gc.collect()
    for path, size in zip(paths, before, strict=True):
        with sqlite3.connect(path) as probe:
            assert probe.execute("PRAGMA freelist_count").fetchone()[0] == 0, path
        assert path.stat().st_size < size, path


def test_an_existing_state_dir_switches_to_incremental_vacuum_once(tmp_path: Path) -> None:
    """Files made before this change have auto_vacuum=NONE, which only a VACUUM can change:
    ``prepare_storage`` (run by ``ember serve`` before it serves) does that once, and says so."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    for name in ("platform.db", "kv.sqlite3"):  # as an older ember left them
        with sqlite3.connect(state / name) as old:
            old.execute("PRAGMA journal_mode=WAL")
    plane = ControlPlane(state, CONFIG, clock=ManualClock())
    try:
        paths = (plane.db.path, plane.namespaces.data.path)
        for path in paths:
            with sqlite3.connect(path) as probe:
                assert probe.execute("PRAGMA auto_vacuum").fetchone()[0] == 0, path
        notes = plane.prepare_storage()
        assert len(notes) == 2 and all("auto_vacuum=INCREMENTAL" in note for note in notes)
        for path in paths:
            with sqlite3.connect(path) as probe:
                assert probe.execute("PRAGMA auto_vacuum").fetchone()[0] == 2, path
        assert plane.prepare_storage() == []  # once
    finally:
        plane.close()


def test_free_pages_are_released_in_a_pass_that_deleted_no_account(plane: ControlPlane) -> None:
    """Pages freed by other deletions (a worker deleted, a sweep stopped before its release)
    go back too, not only after a pass that deleted an account."""
    account, _ = plane.accounts.create_permanent("keeper")
    extra = [Part(f"m{i}.py", f"m{i}.py", "text/x-python", b"#" * 4000) for i in range(40)]
    plane.scripts.upload(account, "w", upload(extra_parts=extra), deploy=True, source="api")
    plane.scripts.delete(account, "w")
    with plane.db.reader() as conn:
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0

    assert plane.gc.collect().accounts_deleted == ()

    with plane.db.reader() as conn:
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0


class FailingData:
    """The KV store behind the ``NamespaceData`` seam, failing to delete one namespace."""

    def __init__(self, store: Any, failing: str) -> None:
        self.store = store
        self.failing = failing

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def delete_namespace(self, namespace_id: str, **kwargs: Any) -> Any:
        if namespace_id == self.failing:
            raise sqlite3.OperationalError("disk I/O error")
        return self.store.delete_namespace(namespace_id, **kwargs)


def test_an_account_that_fails_to_delete_does_not_hold_up_the_others(plane: ControlPlane) -> None:
    stuck = temporary(plane).account
    stuck_ns = plane.namespaces.create(stuck, "n")
    other = temporary(plane, client="10.0.0.2").account
    plane.namespaces.create(other, "n")
    plane.namespaces.data = FailingData(plane.namespaces.data, stuck_ns.id)
    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)

    report = plane.gc.collect()

    assert report.accounts_deleted == (other.id,)
    assert len(report.failures) == 1
    assert stuck.id in report.failures[0] and "disk I/O error" in report.failures[0]
    plane.namespaces.data = plane.namespaces.data.store  # the disk recovered: the next pass
    assert plane.gc.collect().accounts_deleted == (stuck.id,)


def test_a_write_ahead_log_left_untruncated_is_reported_and_retried(plane: ControlPlane) -> None:
    """Another connection reading an older snapshot keeps ``wal_checkpoint(TRUNCATE)`` from
    finishing: the write-ahead log still holds the deleted account's pages. The sweep says so
    and truncates it on a later pass, once the reader is done."""
    account_id = _expired_account_with_many_rows(plane)
    reader = sqlite3.connect(plane.db.path)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM accounts").fetchone()  # holds its snapshot

    report = plane.gc.collect()

    assert report.accounts_deleted == (account_id,)
    assert [f for f in report.failures if "write-ahead log" in f and "platform.db" in f]
    wal = plane.db.path.with_name(plane.db.path.name + "-wal")
    assert wal.stat().st_size > 0
    reader.execute("COMMIT")
    reader.close()
    assert plane.gc.collect().failures == ()
    assert wal.stat().st_size == 0


def test_stop_ends_the_sweep_between_two_batches_of_a_namespace(plane: ControlPlane) -> None:
    """Shutdown (``stop``) is honoured after the batch in progress, not only once a whole
    namespace, however large, is deleted; the next start finishes the account."""
    account_id = _expired_account_with_many_rows(plane)
    store = plane.namespaces.data

    def stop_at_the_first_batch(statement: str) -> None:
        if statement.startswith("DELETE FROM kv"):
            plane.gc.stop()

    store._db.set_trace_callback(stop_at_the_first_batch)  # noqa: SLF001 - the real statements
    with pytest.raises(SweepStopped):
        plane.gc.collect()
    store._db.set_trace_callback(None)  # noqa: SLF001

    with store._db:  # noqa: SLF001
        left = store._db.execute("SELECT COUNT(*) FROM kv").fetchone()[0]  # noqa: SLF001
    assert KEYS - BATCH.rows <= left < KEYS
    restarted = GarbageCollector(plane.db, plane.files, plane.namespaces, plane.clock, BATCH)
    assert restarted.collect().accounts_deleted == (account_id,)
