"""Fair share of one model between accounts: the per-account cap and the fair queue order.

The groups here are real ``ModelGroup`` objects over real ``Replica`` objects whose state the
test sets (never started: their supervising task is a pending future), as in
test_acquire_now.py. ``test_random_arrivals_follow_the_reference_order`` drives random
arrivals and completions through the group and through ``_Reference``, a few lines that say
the rule directly: the next slot goes to the account with the fewest sequences running, ties
to the one served longest ago (never served first, then the oldest waiting request), and
within an account to its oldest request.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from ember.models.pool.admission import ModelGroup, Ticket
from ember.models.pool.config import PoolSettings, ReplicaConfig, parse_pool_config
from ember.models.pool.errors import CapacityExceeded
from ember.models.pool.fair import AccountCap, Fairness
from ember.models.pool.lease import Lease
from ember.models.pool.pool import RequestOptions
from ember.models.pool.replica import Replica, State

MODEL = "@cf/zai-org/glm-4.7-flash"
PATH = "/v1/chat/completions"


def _who(name: str) -> Fairness:
    return Fairness(f"account:{name}", f"account {name}")


def _group(
    loop: asyncio.AbstractEventLoop,
    slots: int,
    max_queued: int = 1000,
    cap: AccountCap | None = None,
    replicas: int = 1,
) -> ModelGroup:
    group = ModelGroup(MODEL, max_queued, 60, cap)
    for index in range(replicas):
        config = ReplicaConfig(url=f"http://127.0.0.1:{9000 + index}", max_running_requests=slots)
        replica = Replica(MODEL, index, config, None, PoolSettings(), None, group.changed, print)  # type: ignore[arg-type]
        replica._task = loop.create_future()  # type: ignore[assignment]  # never supervised
        replica.state = State.READY
        group.replicas.append(replica)
    return group


def test_a_flood_waits_behind_another_accounts_single_request() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=1)
        running = group.acquire_now(None, False, fairness=_who("attacker"))
        assert isinstance(running, Lease)
        flood = [group.acquire_now(None, False, fairness=_who("attacker")) for _ in range(3)]
        victim = group.acquire_now(None, False, fairness=_who("victim"))
        assert all(isinstance(t, Ticket) for t in [*flood, victim])
        running.release()
        # Oldest-first would give the slot to the flood's first request.
        assert victim.future.done() and not any(t.future.done() for t in flood)  # type: ignore[union-attr]
        victim.future.result().release()  # type: ignore[union-attr]
        # The victim was served last: the attacker's queue goes on in its own order.
        assert [t.future.done() for t in flood] == [True, False, False]  # type: ignore[union-attr]

    asyncio.run(main())


def test_equal_accounts_take_turns() -> None:
    """One slot: both accounts have nothing running whenever it frees, so turns decide."""

    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=1)
        first = group.acquire_now(None, False, fairness=_who("a"))
        assert isinstance(first, Lease)
        waiting = [("a", group.acquire_now(None, False, fairness=_who("a"))) for _ in range(3)]
        waiting += [("b", group.acquire_now(None, False, fairness=_who("b"))) for _ in range(3)]
        order = []
        lease = first
        for _ in range(6):
            lease.release()
            (name, ticket), *_ = [(n, t) for n, t in waiting if t.future.done()]  # type: ignore[union-attr]
            waiting.remove((name, ticket))
            order.append(name)
            lease = ticket.future.result()  # type: ignore[union-attr]
        assert order == ["b", "a", "b", "a", "b", "a"]

    asyncio.run(main())


def test_a_retry_keeps_its_turn_before_fairer_accounts() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=1)
        held = group.acquire_now(None, False, fairness=_who("busy"))
        assert isinstance(held, Lease)
        other = group.acquire_now(None, False, fairness=_who("idle"))
        retried = group.acquire_now(None, False, retry=True, fairness=_who("busy"))
        assert isinstance(other, Ticket) and isinstance(retried, Ticket)
        held.release()
        assert retried.future.done() and not other.future.done()

    asyncio.run(main())


def test_the_cap_counts_running_and_queued_and_names_the_limit() -> None:
    async def main() -> None:
        cap = AccountCap(2, f'ai.models."{MODEL}".max_account_requests')
        group = _group(asyncio.get_running_loop(), slots=1, max_queued=4, cap=cap)
        running = group.acquire_now(None, False, fairness=_who("a"))
        queued = group.acquire_now(None, False, fairness=_who("a"))
        assert isinstance(running, Lease) and isinstance(queued, Ticket)
        with pytest.raises(CapacityExceeded) as refused:
            group.acquire_now(None, False, fairness=_who("a"))
        assert refused.value.code.code == 3036 and refused.value.code.status == 429
        text = refused.value.description
        assert text.startswith("Account limited: account a already has 2 AI requests")
        assert f"for {MODEL}" in text and "at most 2" in text and cap.why in text
        assert refused.value.retry_after == 1.0
        with pytest.raises(CapacityExceeded):  # the slow path refuses the same way
            await group.acquire(None, False, fairness=_who("a"))
        # Another account still queues; a retry of the capped account is never refused.
        assert isinstance(group.acquire_now(None, False, fairness=_who("b")), Ticket)
        retried = group.acquire_now(None, False, retry=True, fairness=_who("a"))
        assert isinstance(retried, Ticket)
        # Requests without a fairness id (internal callers) are not capped.
        assert isinstance(group.acquire_now(None, False), Ticket)
        group.cancel(queued)  # leaving the queue gives the place back
        group.cancel(retried)
        assert isinstance(group.acquire_now(None, False, fairness=_who("a")), Ticket)

    asyncio.run(main())


def test_the_cap_frees_as_requests_end() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=2, max_queued=4, cap=AccountCap(1, "x"))
        lease = group.acquire_now(None, False, fairness=_who("a"))
        assert isinstance(lease, Lease)
        for reject in (False, True):  # a free slot: only the cap stands in the way
            with pytest.raises(CapacityExceeded) as refused:
                group.acquire_now(None, reject, fairness=_who("a"))
            assert refused.value.code.code == 3036
        lease.release()
        assert isinstance(group.acquire_now(None, False, fairness=_who("a")), Lease)

    asyncio.run(main())


def test_a_capped_request_that_would_wait_hears_of_the_models_limits_first() -> None:
    """3036 says the account, not the platform, is the limit: where the model itself would
    refuse (no slot and ``rejectIfBusy``, or a full queue) the answer stays 3040."""

    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=1, max_queued=1, cap=AccountCap(1, "x"))
        assert isinstance(group.acquire_now(None, False, fairness=_who("a")), Lease)
        codes = []
        for reject in (True, False):
            with pytest.raises(CapacityExceeded) as refused:
                group.acquire_now(None, reject, fairness=_who("a"))
            codes.append(refused.value.code.code)
        # No free slot: rejectIfBusy would refuse anybody (3040); waiting only the cap refuses.
        assert codes == [3040, 3036]
        assert isinstance(group.acquire_now(None, False, fairness=_who("b")), Ticket)
        with pytest.raises(CapacityExceeded) as refused:
            group.acquire_now(None, False, fairness=_who("a"))
        assert refused.value.code.code == 3040  # the queue is full for everybody

    asyncio.run(main())


@pytest.mark.parametrize(
    ("share", "model", "expected"),
    [
        (None, {}, None),  # ember dev: no cap
        (0.5, {}, (256, 128)),  # all 128 running + 0.5 of 256 queued, 128 of them waiting
        (0.5, {"max_running_requests": 1, "max_queued_requests": 2}, (2, 1)),
        (0.5, {"replicas": 2, "max_running_requests": 4, "max_queued_requests": 8}, (12, 4)),
        # A queue too small for a share: every slot, and one place to wait unless on them all.
        (0.5, {"max_running_requests": 8, "max_queued_requests": 1}, (8, 1)),
        (0.01, {"max_running_requests": 1, "max_queued_requests": 0}, (1, 1)),
        (0.5, {"max_account_requests": 7}, (7, None)),  # the operator's own number wins
        (None, {"max_account_requests": 7}, (7, None)),
    ],
)
def test_the_cap_is_a_share_of_the_models_bound(
    share: float | None, model: dict, expected: tuple[int, int | None] | None
) -> None:
    # The share once applied to running + queued (0.5 of 128 + 256: 192): with a small queue
    # that refused a lone account while half the slots sat idle. It applies to the queue now.
    pool = {"account_share": share} if share is not None else None
    config = parse_pool_config({MODEL: model}, pool)
    cap = config.serving(MODEL).account_cap(config.settings.account_share)
    assert ((cap.maximum, cap.waiting) if cap is not None else None) == expected
    if cap is not None:
        key = "max_account_requests" if "max_account_requests" in model else "account_share"
        assert key in cap.why


# -- random arrivals against the reference order ---------------------------------------------


@dataclass
class _Reference:
    slots: int
    running: dict[str, int] = field(default_factory=dict)  # account -> sequences running
    total: int = 0
    waiting: list[tuple[int, str, int]] = field(default_factory=list)  # (arrival, account, w)
    last_served: dict[str, int] = field(default_factory=dict)
    grants: int = 0

    def fits(self, weight: int) -> bool:
        return self.total == 0 or self.total + weight <= self.slots

    def grant(self, account: str, weight: int) -> None:
        self.running[account] = self.running.get(account, 0) + weight
        self.total += weight
        self.grants += 1
        self.last_served[account] = self.grants

    def arrive(self, arrival: int, account: str, weight: int) -> bool:
        """True when it runs at once (nobody waits and it fits)."""
        if not self.waiting and self.fits(weight):
            self.grant(account, weight)
            return True
        self.waiting.append((arrival, account, weight))
        return False

    def finish(self, account: str, weight: int) -> list[int]:
        """The arrivals that get a slot now, in order."""
        self.running[account] -= weight
        self.total -= weight
        served = []
        while self.waiting:

            def rank(item: tuple[int, str, int]) -> tuple[int, int, int]:
                arrival, who, _ = item
                return (self.running.get(who, 0), self.last_served.get(who, -1), arrival)

            best = min(self.waiting, key=rank)
            # Within the chosen account, its oldest request (the rank's last field).
            if not self.fits(best[2]):
                break  # a heavy request keeps its turn
            self.waiting.remove(best)
            self.grant(best[1], best[2])
            served.append(best[0])
        return served


@dataclass
class _Run:
    """One random run: the group and the reference, fed the same arrivals and completions."""

    group: ModelGroup
    reference: _Reference
    running: list[tuple[str, int, Lease]] = field(default_factory=list)
    tickets: dict[int, tuple[str, int, Ticket]] = field(default_factory=dict)

    def arrive(self, arrival: int, account: str, weight: int) -> None:
        admitted = self.group.acquire_now(None, False, weight, fairness=_who(account))
        assert isinstance(admitted, Lease) == self.reference.arrive(arrival, account, weight)
        if isinstance(admitted, Lease):
            self.running.append((account, weight, admitted))
        else:
            self.tickets[arrival] = (account, weight, admitted)

    async def finish(self, index: int) -> None:
        account, weight, lease = self.running.pop(index)
        order: list[int] = []
        for arrival, (_, _, ticket) in self.tickets.items():
            ticket.future.add_done_callback(lambda _f, a=arrival: order.append(a))
        lease.release()
        await asyncio.sleep(0)  # the callbacks run in the order the leases were granted
        expected = self.reference.finish(account, weight)
        assert order == expected
        for done in order:
            who, size, ticket = self.tickets.pop(done)
            self.running.append((who, size, ticket.future.result()))


@pytest.mark.parametrize("seed", range(8))
def test_random_arrivals_follow_the_reference_order(seed: int) -> None:
    rng = random.Random(seed * 104729 + 3)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        compared = 0
        for _ in range(25):
            slots = rng.randint(1, 3)
            accounts = [f"acct{i}" for i in range(rng.randint(2, 4))]
            run = _Run(_group(loop, slots), _Reference(slots))
            for arrival in range(rng.randint(6, 30)):
                if run.running and rng.random() < 0.45:
                    await run.finish(rng.randrange(len(run.running)))
                    compared += 1
                run.arrive(arrival, rng.choice(accounts), 1 if rng.random() < 0.8 else 2)
            while run.running:  # drain: each completion hands out slots as the reference does
                await run.finish(0)
                compared += 1
            assert not run.tickets and not run.reference.waiting
        assert compared > 200

    asyncio.run(main())


def test_the_pool_sends_the_waiting_victim_before_the_flood() -> None:
    """Through ``ModelPool.stream`` to a replica double: what reaches the replica, in order."""
    from tests.models.pool.gate_server import gate_servers
    from tests.models.pool.test_admission import BODY, _pool, _wait

    def asking(name: str) -> dict:
        return {**BODY, "messages": [{"role": "user", "content": name}]}

    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], {"account_share": 1.0}, slots=1, max_queued_requests=8)
            assert await pool.wait_ready(MODEL, 10)
            group = pool.group(MODEL)
            attacker = RequestOptions(fairness=_who("attacker"))
            first = await pool.stream(MODEL, PATH, asking("flood 0"), attacker)
            flood = [
                asyncio.create_task(pool.stream(MODEL, PATH, asking(f"flood {i}"), attacker))
                for i in (1, 2, 3)
            ]
            await _wait(lambda: group.queued == 3)
            victim = asyncio.create_task(
                pool.stream(MODEL, PATH, asking("victim"), RequestOptions(fairness=_who("v")))
            )
            await _wait(lambda: group.queued == 4)
            streams = [first]
            for _ in range(4):  # each request ends in turn and frees the one slot
                (held,) = group.replicas[0].leases
                held.release()
                await _wait(lambda: len(a.seen) == len(streams) + 1)
                streams.append(a.seen[-1])
            asked = [body["messages"][0]["content"] for body in a.seen]
            assert asked == ["flood 0", "victim", "flood 1", "flood 2", "flood 3"]
            a.open()
            for task in [*flood, victim]:
                assert [e async for e in await task][-1] == "[DONE]"
            await first.aclose()
            await pool.aclose()

    asyncio.run(main())


def _share(name: str, share: float) -> Fairness:
    return Fairness(f"account:{name}", f"account {name}", running_share=share)


def test_an_account_runs_at_most_its_share_of_the_slots_and_others_find_them_free() -> None:
    """300 slow streams of one account held all 128 slots; another's call then waited 107 s."""

    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=4, max_queued=100)
        hog = [group.acquire_now(None, False, fairness=_share("hog", 0.5)) for _ in range(5)]
        # Half the slots run; the rest wait with slots free, however long those run.
        assert [isinstance(t, Lease) for t in hog] == [True, True, False, False, False]
        assert group.outstanding == 2 and group.queued == 3
        honest = [group.acquire_now(None, False, fairness=_share("honest", 0.5)) for _ in range(2)]
        assert all(isinstance(t, Lease) for t in honest)
        # A freed hog slot goes to the hog's next waiter (nobody else waits): its share again.
        hog[0].release()  # type: ignore[union-attr]
        assert hog[2].future.done() and not hog[3].future.done()  # type: ignore[union-attr]
        # Each account's share of the 4 slots is its own: a third account waits only for a
        # slot, never behind the hog's queue (the waiter at its share is passed over).
        third = group.acquire_now(None, False, fairness=_share("third", 0.25))
        assert isinstance(third, Ticket)
        honest[0].release()  # type: ignore[union-attr]
        assert third.future.done() and not hog[3].future.done()  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_share_below_one_slot_still_runs_one_request() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop(), slots=2)
        first = group.acquire_now(None, False, fairness=_share("small", 0.1))
        second = group.acquire_now(None, False, fairness=_share("small", 0.1))
        assert isinstance(first, Lease) and isinstance(second, Ticket)
        first.release()
        assert second.future.done()

    asyncio.run(main())
