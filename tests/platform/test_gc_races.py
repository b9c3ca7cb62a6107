"""The expiry sweep against what the platform serves meanwhile: claims, uploads, secrets.

``ember serve`` runs the sweep on a thread, in batches, while it answers requests, and the
clock it reads is the wall clock, which NTP may step back. An account the sweep has started to
delete must be gone to everybody from that instant (a claim gets the expired answer), and an
account claimed before that instant must lose nothing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ember.bindings.kv.store import KVStore
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.errors import ClaimRejected, TailNotFound, Unauthenticated
from ember.runtime.deployments.plane import ControlPlane
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
