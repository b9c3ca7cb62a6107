"""The expiry sweep against what the platform serves meanwhile: claims, uploads, secrets.

``ember serve`` runs the sweep on a thread, in batches, while it answers requests, and the
clock it reads is the wall clock, which NTP may step back. An account the sweep has started to
delete must be gone to everybody from that instant (a claim gets the expired answer), and an
account claimed before that instant must lose nothing.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ember.bindings.kv.store import KVStore
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.errors import ClaimRejected, TailNotFound, Unauthenticated
from ember.runtime.deployments.gc import GarbageCollector
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import SecretValue
from ember.runtime.platform.lifespan import PlatformLifespan
from tests.platform.test_store import CONFIG, temporary, upload


class GatedData:
    """The KV store behind the ``NamespaceData`` seam, holding the sweep at its first namespace
    deletion until the test lets it go on."""

    def __init__(self, store: KVStore) -> None:
        self.store = store
        self.reached = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def delete_namespace(self, namespace_id: str, **kwargs: Any) -> Any:
        self.reached.set()
        assert self.release.wait(30), "the test never released the sweep"
        return self.store.delete_namespace(namespace_id, **kwargs)


@pytest.fixture
def plane(tmp_path: Path) -> ControlPlane:
    plane = ControlPlane(tmp_path / "state", CONFIG, clock=ManualClock())
    yield plane
    plane.close()


def _account_with_data(plane: ControlPlane):  # noqa: ANN202
    created = temporary(plane)
    namespace = plane.namespaces.create(created.account, "n")
    for i in range(20):
        plane.namespaces.data.put(namespace.id, f"k{i}", b"v")
    result = plane.scripts.upload(created.account, "w", upload(), deploy=True, source="api")
    plane.materialize(created.account.id, result.version)
    return created, namespace


def test_a_claim_after_the_sweep_began_gets_the_expired_answer(plane: ControlPlane) -> None:
    """The review's claim_mid_sweep: the sweep listed the account and is deleting it; the clock
    steps back 5 s (NTP), which made the account look unexpired, and a claim was accepted, then
    the claimed account lost its KV data, files, versions and row."""
    created, _ = _account_with_data(plane)
    tail = plane.tails.create(created.account, "w", {"filters": []})
    gated = GatedData(plane.namespaces.data)
    plane.namespaces.data = gated
    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)
    reports: list[Any] = []
    sweep = threading.Thread(target=lambda: reports.append(plane.gc.collect()))
    sweep.start()
    try:
        assert gated.reached.wait(30)
        plane.clock.advance(-5)  # now before the account's expiry again
        with pytest.raises(ClaimRejected, match="expired before it was claimed"):
            plane.accounts.claim(created.claim_token, "10.0.0.9")
        with pytest.raises(Unauthenticated):
            plane.accounts.authenticate(created.token.token)
        with pytest.raises(TailNotFound):
            plane.tails.open(tail.id)
        assert plane.accounts.find_by_claim_token(created.claim_token) is None
    finally:
        gated.release.set()
        sweep.join(30)
    assert reports[0].accounts_deleted == (created.account.id,)
    assert plane.accounts.find(created.account.id) is None
    assert not plane.files.account_dir(created.account.id).exists()


def test_the_sweep_deletes_exactly_the_accounts_it_is_given(plane: ControlPlane) -> None:
    """``ember serve`` stops an account's workers, crons and tails, then hands the sweep the
    accounts it prepared: one that expired in between is left for the next pass, not deleted
    while its workers still run."""
    first = temporary(plane).account
    plane.clock.advance(10)
    second = temporary(plane, client="10.0.0.2").account
    plane.clock.advance(CONFIG.temporary.ttl_seconds - 5)
    prepared = plane.gc.mark_expired()
    assert prepared == [first.id]
    plane.clock.advance(10)  # the second expires while the first's workers are stopped

    assert plane.gc.collect(accounts=prepared).accounts_deleted == (first.id,)
    assert plane.accounts.find(second.id) is not None
    assert plane.gc.collect().accounts_deleted == (second.id,)


def test_an_account_claimed_before_the_sweep_reaches_it_keeps_everything(
    plane: ControlPlane,
) -> None:
    """Listed as expired, then claimed (the clock stepped back) before the sweep's first step on
    it: the sweep leaves it whole."""
    created, namespace = _account_with_data(plane)
    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)
    listed = plane.gc.expired_accounts()
    assert listed == [created.account.id]
    plane.clock.advance(-5)
    claimed = plane.accounts.claim(created.claim_token, "10.0.0.9")
    plane.clock.advance(5)

    assert plane.gc.collect(accounts=listed).accounts_deleted == ()

    account = plane.accounts.get(created.account.id)
    assert account.kind == "permanent"
    plane.accounts.authenticate(claimed.token.token)
    assert plane.namespaces.data.get(namespace.id, "k19") is not None
    assert [v.number for v in plane.scripts.versions(account, "w")] == [1]
    assert plane.files.account_dir(account.id).exists()


class StoppedWorkers:
    """What ``ember serve``'s housekeeping stops before an account is deleted (its live
    deployments, crons and tails), at the lifespan's seam: records which accounts it stopped,
    and takes ``step`` seconds of the clock per account, as stopping isolates takes time."""

    def __init__(self, clock: ManualClock, step: float) -> None:
        self.clock = clock
        self.step = step
        self.stopped: list[str] = []
        self.crons_dropped: list[str] = []

    def slots(self) -> list[Any]:
        return []

    async def drop_account(self, account_id: str, *why: object) -> int:
        """``LiveDeployments.drop_account``: ``why`` is the error and reason its requests get."""
        self.stopped.append(account_id)
        self.clock.advance(self.step)
        return 0


class Housekeeping(PlatformLifespan):
    """``ember serve``'s garbage collection (``PlatformLifespan.collect_garbage``) over a real
    control plane."""

    def __init__(self, plane: ControlPlane, workers: StoppedWorkers) -> None:
        self.plane = plane
        self.live = workers  # type: ignore[assignment]
        self.crons = SimpleNamespace(drop_account=workers.crons_dropped.append)  # type: ignore[assignment]
        self.hub = SimpleNamespace(close_script=lambda script_id: None)  # type: ignore[assignment]
        self.lines: list[str] = []
        self.print_line = self.lines.append


def test_ember_serve_deletes_only_accounts_whose_workers_it_stopped(plane: ControlPlane) -> None:
    """The review's case: the housekeeping listed the expired accounts, stopped their workers,
    then the sweep listed them again on its thread: one that expired in between was deleted
    while its slot, route, crons and tails stayed until a restart."""
    first = temporary(plane).account
    plane.clock.advance(10)
    second = temporary(plane, client="10.0.0.2").account
    plane.clock.advance(CONFIG.temporary.ttl_seconds - 5)
    workers = StoppedWorkers(plane.clock, step=10)
    housekeeping = Housekeeping(plane, workers)

    assert asyncio.run(housekeeping.collect_garbage()) == (first.id,)
    assert workers.stopped == workers.crons_dropped == [first.id]
    assert plane.accounts.find(second.id) is not None  # for the next pass

    assert asyncio.run(housekeeping.collect_garbage()) == (second.id,)
    assert workers.stopped == [first.id, second.id]


def test_writes_that_authenticated_before_the_mark_store_nothing(plane: ControlPlane) -> None:
    """An upload, secret change, deployment or namespace that authenticated just before the
    account expired reaches its transaction once the sweep has begun: it is refused as the
    token now is, and nothing of it outlives the account (before, the upload committed its
    version and wrote its files after the account's folder was removed)."""
    created, _ = _account_with_data(plane)
    account = created.account  # what the requests authenticated as
    live = plane.scripts.live(account, "w")
    gated = GatedData(plane.namespaces.data)
    plane.namespaces.data = gated
    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)
    sweep = threading.Thread(target=plane.gc.collect)
    sweep.start()
    try:
        assert gated.reached.wait(30)
        plane.clock.advance(-5)  # not even a clock stepped back lets them in
        with pytest.raises(Unauthenticated):
            plane.scripts.upload(account, "late", upload(), deploy=True, source="api")
        with pytest.raises(Unauthenticated):
            plane.secrets.put(account, "w", SecretValue("S", "secret_text", "v"), "api")
        with pytest.raises(Unauthenticated):
            plane.scripts.deploy(account, "w", list(live.versions), {}, force=False, source="api")
        with pytest.raises(Unauthenticated):
            plane.namespaces.create(account, "late")
    finally:
        gated.release.set()
        sweep.join(30)
    assert plane.accounts.find(account.id) is None
    assert not plane.files.account_dir(account.id).exists()
    assert [n.title for n in plane.namespaces.data.list_namespaces()] == []


class LateFiles:
    """The account's files (``AccountFiles``) as the sweep sees them, with an upload thread
    whose version committed before the mark writing its files out just after the sweep
    removed the account's folder."""

    def __init__(self, plane: ControlPlane, late: Any) -> None:
        self.files = plane.files
        self.plane = plane
        self.late = [late]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.files, name)

    def remove_account(self, account_id: str) -> None:
        self.files.remove_account(account_id)
        while self.late:  # once, just after the first removal
            self.plane.materialize(account_id, self.late.pop())


def test_files_written_after_the_folder_went_go_with_the_account(plane: ControlPlane) -> None:
    created, _ = _account_with_data(plane)
    late = plane.scripts.upload(created.account, "late", upload(), deploy=True, source="api")
    plane.gc = GarbageCollector(
        plane.db, LateFiles(plane, late.version), plane.namespaces, plane.clock
    )
    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)
    assert plane.gc.collect().accounts_deleted == (created.account.id,)
    assert not plane.files.account_dir(created.account.id).exists()
