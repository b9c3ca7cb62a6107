"""What temporary accounts' asset files and open sessions take of their shared pool is a running
total (a session start no longer walks every temporary account's sessions and files), checked
against the slow recount on random sessions, uploads, expiries, sweeps, claims and deletions;
and an account's bookkeeping is freed once it holds no open session."""

from __future__ import annotations

import base64
import random
import threading
from collections.abc import Callable
from pathlib import Path

from ember.runtime.deployments.asset_files import AssetBound
from ember.runtime.deployments.assets import AssetStore
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.errors import QuotaExceeded, Unauthenticated


def _manifest(rng: random.Random) -> dict[str, object]:
    files = {
        f"/f{i}": {"hash": f"{rng.randrange(12):032x}", "size": rng.randrange(1, 50)}
        for i in range(rng.randrange(1, 4))
    }
    sizes: dict[str, int] = {}
    for entry in files.values():  # one size per hash, as a real manifest has
        entry["size"] = sizes.setdefault(str(entry["hash"]), int(entry["size"]))
    return {"manifest": files}


def test_the_pool_total_matches_a_recount(tmp_path: Path) -> None:
    rng = random.Random(7)
    clock = ManualClock(1000.0)
    store = AssetStore(tmp_path / "accounts", clock)
    temporary = {"t0", "t1", "t2", "t3"}
    loads: list[int] = []

    def ids() -> list[str]:
        loads.append(1)
        return sorted(temporary)

    open_sessions: list[tuple[str, str, dict[str, object]]] = []
    for _ in range(400):
        op = rng.random()
        account = rng.choice([*sorted(temporary), "p0"])
        if op < 0.4:
            body = _manifest(rng)
            started = store.start(account, body, temporary=account in temporary)
            if started["buckets"]:
                open_sessions.append((account, started["jwt"], body))
        elif op < 0.7 and open_sessions:
            account, jwt, body = open_sessions.pop(rng.randrange(len(open_sessions)))
            entries = body["manifest"].values()  # type: ignore[union-attr]
            files = {e["hash"]: base64.b64encode(b"x" * e["size"]) for e in entries}
            try:
                store.upload(account, jwt, files)
            except Unauthenticated:
                pass  # dropped by a newer session, or expired
        elif op < 0.8:
            clock.advance(rng.choice([60.0, 1800.0, 4000.0]))
        elif op < 0.9:
            store.sweep(account, kept=set)
        elif op < 0.95 and account in temporary and len(temporary) > 1:
            temporary.discard(account)
            if rng.random() < 0.5:
                store.end_uploads(account)  # a claim
                store.leave_pool(account)
            else:
                store.forget(account)  # deleted, expired
        assert store.temporary_bytes(ids) == store.stored_bytes(sorted(temporary))
        tables = store.tables
        with tables.lock:  # what is due expires, as a walk over every session finds it
            tables.expire()
            due = [
                token
                for table in (tables.uploads, tables.completed)
                for token, session in table.items()
                if session.expires < clock() and not session.resolving
            ]
        assert due == []
    assert loads == [1]  # the accounts were listed (and their files counted) once


def test_an_account_without_open_sessions_is_forgotten(tmp_path: Path) -> None:
    clock = ManualClock(1000.0)
    store = AssetStore(tmp_path / "accounts", clock)
    for i in range(20):
        account = f"a{i}"
        jwt = store.start(account, {"manifest": {"/x": {"hash": "a" * 32, "size": 1}}})["jwt"]
        store.upload(account, jwt, {"a" * 32: base64.b64encode(b"x")})
        store.sweep(account, kept=set)
    clock.advance(2 * 3600)
    store.sweep("a0", kept=set)  # any call that expires sessions
    assert store.tables.accounts == {}


def test_two_temporary_accounts_cannot_pass_the_pool_together(tmp_path: Path) -> None:
    """Two temporary accounts' sessions starting at the same instant: each checked the pool
    before the other's session counted in it, so both passed it together. The check and the
    reservation are one step for the whole platform."""
    store = AssetStore(tmp_path / "accounts", ManualClock(1000.0))
    outcomes: dict[str, str] = {}
    others: list[threading.Thread] = []

    def start(account: str, check: Callable[[int], None]) -> None:
        body = {"manifest": {"/a": {"hash": f"{len(account):032x}", "size": 600}}}
        try:
            store.start(account, body, temporary=True, check=check)
            outcomes[account] = "started"
        except QuotaExceeded:
            outcomes[account] = "refused"

    def pool_check(adding: int) -> None:
        AssetBound(1000, "temporary accounts", "claim").check(
            store.temporary_bytes(lambda: ["t1", "t22"]), adding
        )

    def first_check(adding: int) -> None:
        pool_check(adding)
        # The other account starts now, between this one's check and its reservation.
        other = threading.Thread(target=start, args=("t22", pool_check))
        other.start()
        other.join(timeout=1.0)
        others.append(other)

    start("t1", first_check)
    others[0].join()
    assert sorted(outcomes.values()) == ["refused", "started"], outcomes


def test_two_uploads_of_one_hash_count_it_once(tmp_path: Path, monkeypatch) -> None:
    """Two sessions of one temporary account both asked for a file (neither saw it stored)
    and both upload it at once: each checked that it was not on disk before either wrote it,
    both counted its bytes, and the pool's total drifted up for good. Only the writer that
    created the file counts it."""
    from ember.runtime.deployments import asset_files

    store = AssetStore(tmp_path / "accounts", ManualClock(1000.0))
    ids = lambda: ["t"]  # noqa: E731
    store.temporary_bytes(ids)  # loaded, as the plane does before any start
    body = {"manifest": {"/x": {"hash": "a" * 32, "size": 1000}}}
    tokens = [store.start("t", body, temporary=True)["jwt"] for _ in range(2)]
    both_past_the_check = threading.Barrier(2)
    mkstemp = asset_files.tempfile.mkstemp

    def in_step(*args: object, **kwargs: object) -> tuple[int, str]:
        both_past_the_check.wait(timeout=5)  # neither writes before both looked for the file
        return mkstemp(*args, **kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(asset_files.tempfile, "mkstemp", in_step)
    files = {"a" * 32: base64.b64encode(b"x" * 1000)}
    done: list[str | None] = []
    threads = [
        threading.Thread(target=lambda j=jwt: done.append(store.upload("t", j, files)))
        for jwt in tokens
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(done) == 2 and all(done)  # both sessions complete: the file is there
    assert store.stored_bytes(["t"]) == 1000
    assert store.temporary_bytes(ids) == 1000
    assert [p.name for p in store.files.blobs("t")] == ["a" * 32]  # no part file left


def test_the_expiry_heap_holds_about_the_open_sessions(tmp_path: Path) -> None:
    """Every start pushed an entry on the expiry heap that stayed for the hour, after its
    session was dropped: 20,000 starts of one account kept 20,000 entries for 8 sessions."""
    clock = ManualClock(1000.0)
    store = AssetStore(tmp_path / "accounts", clock)
    body = {"manifest": {"/x": {"hash": "a" * 32, "size": 1}}}
    jwt = store.start("p", body)["jwt"]
    store.upload("p", jwt, {"a" * 32: base64.b64encode(b"x")})
    for _ in range(2000):  # the file is held: each start completes at once, dropping the oldest
        store.start("p", body)
    tables = store.tables
    live = len(tables.uploads) + len(tables.completed)
    assert live == 8
    assert len(tables._due) <= 2 * live + 16
    # what is due still expires
    clock.advance(2 * 3600)
    with tables.lock:
        tables.expire()
    assert (tables.uploads, tables.completed, tables._due) == ({}, {}, [])
