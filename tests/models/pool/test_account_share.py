"""The share ``ember serve`` caps each account at (``ai.pool.account_share``), read from the
pool config as the platform reads it: every running slot plus the share of the queue, at most
the share waiting. A lone account can fill every slot even with a tiny queue; others keep the
rest of the queue and are served first (fair order)."""

from __future__ import annotations

import asyncio

import pytest

from ember.models.pool.admission import ModelGroup, Ticket
from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import CapacityExceeded
from ember.models.pool.lease import Lease
from tests.models.pool.test_fair_share import MODEL, _group, _who


def _share_group(
    loop: asyncio.AbstractEventLoop, replicas: int, slots: int, max_queued: int, share: float
) -> ModelGroup:
    """A group capped as ``ember serve`` caps it: the cap read from the pool config."""
    model = {"replicas": replicas, "max_running_requests": slots, "max_queued_requests": max_queued}
    config = parse_pool_config({MODEL: model}, {"account_share": share})
    cap = config.serving(MODEL).account_cap(config.settings.account_share)
    return _group(loop, slots, max_queued, cap, replicas)


@pytest.mark.parametrize("max_queued", [0, 1])
def test_a_lone_account_fills_every_running_slot_with_a_tiny_queue(max_queued: int) -> None:
    """Nobody else waits: the share must not leave slots idle (3 x 2 slots, not half of them).
    A second account arriving still goes first when a slot frees."""

    async def main() -> None:
        group = _share_group(asyncio.get_running_loop(), 2, 3, max_queued, share=0.5)
        leases = [group.acquire_now(None, False, fairness=_who("a")) for _ in range(6)]
        assert all(isinstance(lease, Lease) for lease in leases)
        # Every slot is taken; 0.5 of a queue of 0 or 1 is no queue place for account a.
        with pytest.raises(CapacityExceeded) as refused:
            group.acquire_now(None, False, fairness=_who("a"))
        assert refused.value.code.code == (3040 if max_queued == 0 else 3036)
        if max_queued == 1:
            text = refused.value.description
            assert "(6 running, 0 waiting; at most 6 per account, 1 of them waiting" in text
            assert "ai.pool.account_share 0.5 of 1 queued, plus all 6 running" in text
            other = group.acquire_now(None, False, fairness=_who("b"))
            assert isinstance(other, Ticket)
            leases[0].release()  # type: ignore[union-attr]
            assert other.future.done()

    asyncio.run(main())


def test_under_the_share_a_second_account_goes_before_the_first_ones_queue() -> None:
    async def main() -> None:
        group = _share_group(asyncio.get_running_loop(), 1, 2, 4, share=0.5)
        first = [group.acquire_now(None, False, fairness=_who("a")) for _ in range(4)]
        assert [isinstance(x, Lease) for x in first] == [True, True, False, False]
        with pytest.raises(CapacityExceeded) as refused:  # both slots and 2 of 4 places
            group.acquire_now(None, False, fairness=_who("a"))
        assert refused.value.code.code == 3036
        second = group.acquire_now(None, False, fairness=_who("b"))
        assert isinstance(second, Ticket)
        first[0].release()  # type: ignore[union-attr]
        assert second.future.done() and not any(t.future.done() for t in first[2:])  # type: ignore[union-attr]

    asyncio.run(main())


def test_the_share_keeps_the_rest_of_the_queue_while_others_run() -> None:
    """Another account holds the slot: account a may still take only its share of the queue,
    so a third account finds a place."""

    async def main() -> None:
        group = _share_group(asyncio.get_running_loop(), 1, 1, 4, share=0.5)
        assert isinstance(group.acquire_now(None, False, fairness=_who("b")), Lease)
        queued = [group.acquire_now(None, False, fairness=_who("a")) for _ in range(2)]
        assert all(isinstance(ticket, Ticket) for ticket in queued)
        with pytest.raises(CapacityExceeded) as refused:
            group.acquire_now(None, False, fairness=_who("a"))
        assert refused.value.code.code == 3036
        text = refused.value.description
        assert "account a already has 2 AI requests in flight for" in text
        assert "(0 running, 2 waiting; at most 3 per account, 2 of them waiting: " in text
        assert "ai.pool.account_share 0.5 of 4 queued, plus all 1 running)" in text
        assert isinstance(group.acquire_now(None, False, fairness=_who("c")), Ticket)

    asyncio.run(main())
