"""A request retried after its replica could not be reached keeps its turn in the queue."""

from __future__ import annotations

import asyncio

import pytest

from ember.models.pool.admission import ModelGroup, Ticket
from ember.models.pool.config import PoolSettings, ReplicaConfig
from ember.models.pool.errors import CapacityExceeded
from ember.models.pool.replica import Lease, Replica, State

MODEL = "@cf/zai-org/glm-4.7-flash"


def _group(loop: asyncio.AbstractEventLoop, max_queued: int) -> ModelGroup:
    group = ModelGroup(MODEL, max_queued=max_queued, queue_timeout=60)
    config = ReplicaConfig(url="http://127.0.0.1:9000", max_running_requests=1)
    replica = Replica(MODEL, 0, config, None, PoolSettings(), None, group.changed, lambda _: None)  # type: ignore[arg-type]
    replica._task = loop.create_future()  # type: ignore[assignment]  # never supervised
    replica.state = State.READY
    group.replicas.append(replica)
    return group


@pytest.mark.parametrize("fast", [True, False])
def test_a_retried_request_is_served_before_those_that_came_after_it(fast: bool) -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop(), max_queued=1)
        first = group.acquire_now(None, False)
        assert isinstance(first, Lease)
        later = group.acquire_now(None, False)  # came after the retried one; the queue is full
        assert isinstance(later, Ticket)
        with pytest.raises(CapacityExceeded):
            group.acquire_now(None, False)
        # The retried request (its replica was unreachable) asks again: it is not refused...
        if fast:
            retried = group.acquire_now(None, False, retry=True)
            assert isinstance(retried, Ticket)
            waiting = asyncio.ensure_future(group.wait(retried, 30))
        else:
            waiting = asyncio.ensure_future(group.acquire(None, True, retry=True))
        await asyncio.sleep(0)
        # ...and the next free slot is its, not the later request's.
        first.release()
        lease = await asyncio.wait_for(waiting, 5)
        assert isinstance(lease, Lease) and not later.future.done()
        lease.release()
        assert (await asyncio.wait_for(later.future, 5)).replica is lease.replica

    asyncio.run(main())


def test_a_retry_takes_a_free_slot_even_while_others_wait() -> None:
    async def main() -> None:
        group = _group(asyncio.get_running_loop(), max_queued=4)
        group.replicas[0].config = ReplicaConfig(
            url="http://127.0.0.1:9000", max_running_requests=2
        )
        held = group.acquire_now(None, False)
        assert isinstance(held, Lease)
        # A waiter that a heavy request (2 slots) keeps queued while one slot is free.
        heavy = group.acquire_now(None, False, weight=2)
        assert isinstance(heavy, Ticket)
        assert isinstance(group.acquire_now(None, False, retry=True), Lease)

    asyncio.run(main())
