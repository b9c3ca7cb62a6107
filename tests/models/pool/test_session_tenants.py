"""Session affinity per account (review22, LOW): an ``x-session-affinity`` value pins a replica
for the account that sent it, not for every account; one account's keys, however many, never
evict another account's pins.

Replicas are real ``Replica`` objects set ready by the test and never started (their
supervising task is a pending future), as in ``test_acquire_now``.
"""

from __future__ import annotations

import asyncio

import pytest

from ember.models.pool.admission import ModelGroup
from ember.models.pool.config import PoolSettings, ReplicaConfig
from ember.models.pool.fair import Fairness
from ember.models.pool.replica import Lease, Replica, State
from ember.models.pool.sessions import MAX_SESSIONS, MAX_SESSIONS_PER_TENANT, SessionTable

MODEL = "@cf/zai-org/glm-4.7-flash"
VICTIM = Fairness("account:victim", "account victim")


def _group(loop: asyncio.AbstractEventLoop) -> ModelGroup:
    group = ModelGroup(MODEL, max_queued=8, queue_timeout=60)
    for index in range(2):
        config = ReplicaConfig(url=f"http://127.0.0.1:{9000 + index}", max_running_requests=8)
        replica = Replica(
            MODEL, index, config, None, PoolSettings(), None, group.changed, lambda line: None
        )  # type: ignore[arg-type]
        replica._task = loop.create_future()  # type: ignore[assignment]  # never supervised
        replica.state = State.READY
        group.replicas.append(replica)
    return group


def _lease(group: ModelGroup, session: str | None, account: Fairness | None) -> Lease:
    lease = group.acquire_now(session, False, fairness=account)
    assert isinstance(lease, Lease)
    return lease


def test_the_same_value_from_another_account_is_placed_on_its_own() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop())
        attacker = Fairness("account:attacker", "account attacker")
        home = _lease(group, "ses_1", VICTIM)  # held: its replica now has more work
        mine = home.replica
        guess = _lease(group, "ses_1", attacker)
        assert guess.replica is not mine, "another account's value pinned the victim's replica"
        # Each keeps its own pin: the victim's conversation stays where its cache is.
        assert _lease(group, "ses_1", VICTIM).replica is mine
        assert _lease(group, "ses_1", attacker).replica is guess.replica

    asyncio.run(main())


def test_accounts_flooding_keys_do_not_evict_another_accounts_pin() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop())
        first = _lease(group, "victim-chat", VICTIM)
        home = first.replica
        first.release()
        # Five accounts send more keys than the whole table holds, a share each and more.
        floods = [Fairness(f"account:flood{a}", f"account flood{a}") for a in range(5)]
        for flood in floods:
            for k in range(MAX_SESSIONS_PER_TENANT + 100):
                _lease(group, f"{flood.id}-{k}", flood).release()
        # The victim's session is still pinned: it goes home although the other replica is idle.
        busy = _lease(group, None, None)
        if busy.replica is not home:
            busy.release()
            busy = _lease(group, None, None)
            assert busy.replica is home
        assert _lease(group, "victim-chat", VICTIM).replica is home
        sessions = group._sessions
        assert len(sessions) == MAX_SESSIONS and sessions.count(VICTIM.id) == 1
        assert all(0 < sessions.count(f.id) <= MAX_SESSIONS_PER_TENANT for f in floods)

    asyncio.run(main())


def test_the_table_bounds_each_tenant_and_the_whole() -> None:
    table: SessionTable[str] = SessionTable(capacity=8, per_tenant=3)
    for k in range(5):
        table.pin("a", f"k{k}", "r")
    assert table.count("a") == 3 and table.get("a", "k1") is None and table.get("a", "k4") == "r"
    table.touch("a", "k2")
    table.pin("a", "k5", "r")  # k3 is now a's least recently used
    assert table.get("a", "k2") == "r" and table.get("a", "k3") is None
    for t in ("b", "c"):
        for k in range(3):
            table.pin(t, f"k{k}", "r")
    # Full (8): c's third pin took the oldest place of a tenant holding the most (a, 3).
    assert len(table) == 8 and [table.count(t) for t in "abc"] == [2, 3, 3]
    assert table.get("a", "k4") is None
    # A newcomer's one pin is kept; a tenant holding the most gives its oldest place again.
    table.pin("d", "only", "r")
    assert len(table) == 8 and table.get("d", "only") == "r"
    assert [table.count(t) for t in "abcd"] == [2, 2, 3, 1] and table.get("b", "k0") is None
    # Without a tenant (ember dev) the whole table is the one user's.
    dev: SessionTable[str] = SessionTable(capacity=8, per_tenant=3)
    for k in range(8):
        dev.pin(None, f"k{k}", "r")
    assert dev.count(None) == 8
    with pytest.raises(ValueError):
        SessionTable(capacity=4, per_tenant=5)


def test_of_equal_holders_the_least_recently_active_gives_way() -> None:
    """review23: ties among the largest holders went by dict order, so the account that pinned
    first lost its pins first, however busy it kept them."""
    table: SessionTable[str] = SessionTable(capacity=4, per_tenant=2)
    for tenant in ("old", "new"):
        for k in range(2):
            table.pin(tenant, f"k{k}", "r")
    table.touch("old", "k0")  # the first account is still using its conversations
    table.pin("third", "k0", "r")
    assert [table.count(t) for t in ("old", "new", "third")] == [2, 1, 1]
    assert table.get("new", "k0") is None and table.get("old", "k1") == "r"
