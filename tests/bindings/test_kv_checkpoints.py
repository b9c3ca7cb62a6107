"""The KV store's write-ahead log is folded into the file by a checkpointer of its own, not by
the writer at the end of a commit: a 24 MB value's commit used to copy its pages into the file
and flush it too, while every other account's write waited. On a real SQLite file: with the
checkpointer held, large writes commit and the file itself does not grow (the writer copied
nothing); let go, the checkpointer folds them in. Nothing here measures time."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ember.bindings.kv.records import KVPut, KVWrite
from ember.bindings.kv.store import KVStore

VALUE = b"v" * 3_000_000


def test_the_writer_leaves_checkpoints_to_the_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite3"
    store = KVStore(path)
    try:
        store.ensure_namespace("ns", "ns", "acct")
        before = path.stat().st_size
        with store.checkpoints.lock:  # the checkpointer cannot run meanwhile
            for i in range(4):
                store.apply(KVPut("ns", (KVWrite(f"k{i}", VALUE),)))
            assert path.stat().st_size - before < len(VALUE)  # nothing copied in by the writer
        store.checkpoints.wait()  # the one the writes asked for, once the lock is free
        assert path.stat().st_size - before >= 4 * len(VALUE)
    finally:
        store.close()
    db = sqlite3.connect(path)  # everything acknowledged is there
    try:
        assert db.execute("SELECT COUNT(*), SUM(LENGTH(value)) FROM kv").fetchone() == (
            4,
            4 * len(VALUE),
        )
    finally:
        db.close()


def test_small_writes_do_not_start_the_checkpointer(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv.sqlite3")
    try:
        store.ensure_namespace("ns", "ns", "acct")
        for i in range(50):
            store.apply(KVPut("ns", (KVWrite(f"k{i}", b"small"),)))
        assert not store.checkpoints.started()
    finally:
        store.close()


def test_emptying_the_log_waits_for_a_checkpoint_in_progress(tmp_path: Path) -> None:
    """gc's truncation of the log (after an account's data was deleted, so none of it stays
    readable there) must not race the checkpointer: a PASSIVE checkpoint in progress makes
    SQLite's TRUNCATE answer busy, and the deleted data stayed in the log until a later pass.
    The store takes the checkpointer's lock around it, as a checkpoint does."""
    import threading

    store = KVStore(tmp_path / "kv.sqlite3")
    try:
        store.ensure_namespace("ns", "ns", "acct")
        store.apply(KVPut("ns", (KVWrite("k", VALUE),)))
        results: list[object] = []
        with store.checkpoints.lock:  # a checkpoint in progress
            releasing = threading.Thread(
                target=lambda: results.append(store.release_free_pages()), daemon=True
            )
            releasing.start()
            releasing.join(0.5)
            assert releasing.is_alive() and not results  # waits for the checkpoint to end
        releasing.join(30)
        assert results and not releasing.is_alive()
        assert (tmp_path / "kv.sqlite3-wal").stat().st_size == 0  # the log was emptied
    finally:
        store.close()
