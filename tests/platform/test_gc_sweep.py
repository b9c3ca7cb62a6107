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

import pytest

from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.gc import GarbageCollector, SweepBatch
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
