"""Deadlines, cancellations and ejections at the moment a slot changes hands.

- A request that spent its time in the queue and timed out soon after its replica got it says
  nothing about that replica: overload must not eject healthy replicas (and so shrink capacity).
- A request cancelled as its slot is granted frees that slot and ends: nothing waits on a
  replica that never answers.
- A replica whose ejection ends takes a waiting request at once, rather than leaving it to wait
  for a busy replica in rotation.

Against sick_server replicas (raw HTTP on loopback): slow, hanging or failing on demand.
"""

from __future__ import annotations

import asyncio

import pytest

from ember.models.pool import errors
from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from tests.models.pool.sick_server import MODEL, sick_server

CHAT = "/v1/chat/completions"
SHORT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
STREAM = {**SHORT, "stream": True}
FAST = {"health_interval_s": 0.05, "health_timeout_s": 1, "unhealthy_after": 2}
GUARD_S = 20  # what "ends" means here: a cancelled request takes milliseconds, a hang forever


async def _read(pool: ModelPool, stream: bool) -> int:
    """One request read to its end: 200, or the code of the pool's error."""
    try:
        if not stream:
            return (await pool.post(MODEL, CHAT, SHORT, RequestOptions())).status
        events = await pool.stream(MODEL, CHAT, STREAM, RequestOptions())
        async for data in events:
            if data == "[DONE]":
                break
        await events.aclose()
        return 200
    except UpstreamFailed as exc:
        return exc.code.code


async def _until(check, what: str) -> None:  # noqa: ANN001 - a predicate
    for _ in range(int(GUARD_S / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_that_spent_its_time_queued_does_not_count_against_a_healthy_replica(
    stream: bool,
) -> None:
    """One slot, answers in 0.6 s, a 1 s deadline: the second request waits 0.6 s for the slot
    and has 0.4 s left on the replica, which then needs 0.6 s. Its client gets the timeout; the
    replica, which held it for less than half the deadline, is not charged with it."""
    lines: list[str] = []

    async def main() -> tuple[int, int, int, bool]:
        with sick_server("ok") as slow:
            slow.delay = 0.6
            settings = {**FAST, "request_timeout_s": 1, "eject_after": 1, "eject_time_s": 3600}
            replica_config = {"url": slow.url, "max_running_requests": 1}
            pool = ModelPool(
                parse_pool_config({MODEL: replica_config}, settings), progress=lines.append
            )
            try:
                assert await pool.wait_ready(MODEL, 30)
                replica = pool.group(MODEL).replicas[0]
                first = asyncio.ensure_future(_read(pool, stream=False))
                await _until(lambda: replica.outstanding == 1, "the first request runs")
                second = asyncio.ensure_future(_read(pool, stream))
                await _until(lambda: pool.group(MODEL).queued == 1, "the second one waits")
                done = await asyncio.wait_for(asyncio.gather(first, second), GUARD_S)
                return done[0], done[1], replica.outlier.failures, replica.outlier.ejected
            finally:
                await pool.aclose()

    first, second, failures, ejected = asyncio.run(main())
    assert first == 200
    assert second == errors.timed_out().code.code  # the client still gets its 3007
    assert (failures, ejected) == (0, False), lines
    assert not [line for line in lines if "ejected" in line]


def test_requests_cancelled_as_their_slot_is_granted_free_it_and_end() -> None:
    """A replica that never answers, one slot: a request holds it, another waits for it; the
    holder is cancelled, then the waiter a few loop turns later (every turn from the slot's
    release to the waiter's wake-up is tried). Each pair ends, and nothing is left held."""

    async def main() -> list[str]:
        problems: list[str] = []
        with sick_server("hang") as hang:
            settings = {**FAST, "request_timeout_s": 3600, "eject_after": 0}
            replica_config = {"url": hang.url, "max_running_requests": 1}
            config = parse_pool_config({MODEL: replica_config}, settings)
            pool = ModelPool(config, progress=lambda line: None)
            try:
                assert await pool.wait_ready(MODEL, 30)
                group = pool.group(MODEL)
                replica = group.replicas[0]
                for turn in range(32):
                    holder = asyncio.ensure_future(_read(pool, stream=turn % 2 == 0))
                    await _until(lambda: replica.outstanding == 1, "the holder runs")
                    waiter = asyncio.ensure_future(_read(pool, stream=turn % 4 < 2))
                    await _until(lambda: group.queued == 1, "the waiter waits")
                    holder.cancel()
                    for _ in range(turn // 2):
                        await asyncio.sleep(0)
                    waiter.cancel()
                    _, pending = await asyncio.wait([holder, waiter], timeout=GUARD_S)
                    if pending:
                        problems.append(f"turn {turn}: {len(pending)} cancelled request(s) hang")
                        break
                    await asyncio.sleep(0)
                    if replica.leases or group.queued or pool._streams:
                        problems.append(
                            f"turn {turn}: {len(replica.leases)} leases, {group.queued} "
                            f"queued, {len(pool._streams)} streams left"
                        )
                        break
                if not problems:
                    await _until(lambda: hang.open_chats == 0, "the replica heard them go")
            finally:
                await pool.aclose()
        return problems

    assert asyncio.run(main()) == []


def test_a_replica_back_from_ejection_takes_a_waiting_request_at_once() -> None:
    """Replica 2 is ejected for 1 s; replica 1's one slot is held by a request it never
    answers. A request that arrives meanwhile waits; when the ejection ends it is the probe on
    replica 2 (now healthy), not left waiting for replica 1's request to time out."""
    lines: list[str] = []

    async def main() -> tuple[int, int, bool]:
        with sick_server("ok") as busy, sick_server("e500") as back:
            settings = {**FAST, "request_timeout_s": 3600, "eject_after": 1, "eject_time_s": 1}
            replicas = [
                {"url": busy.url, "max_running_requests": 1},
                {"url": back.url, "max_running_requests": 1},
            ]
            pool = ModelPool(
                parse_pool_config({MODEL: {"replicas": replicas}}, settings), progress=lines.append
            )
            try:
                assert await pool.wait_ready(MODEL, 30)
                group = pool.group(MODEL)
                await _until(lambda: all(r.state.value == "ready" for r in group.replicas), "up")
                while back.chats == 0:  # alternate until replica 2 has failed one: ejected
                    await _read(pool, stream=False)
                assert group.replicas[1].outlier.ejected
                busy.mode, back.mode = "hang", "ok"
                holder = asyncio.ensure_future(_read(pool, stream=False))
                await _until(lambda: group.replicas[0].outstanding == 1, "replica 1 is busy")
                waiter = asyncio.ensure_future(_read(pool, stream=False))
                await _until(lambda: group.queued == 1, "the request waits")
                try:
                    status = await asyncio.wait_for(asyncio.shield(waiter), GUARD_S)
                finally:
                    holder.cancel()
                    waiter.cancel()
                return status, back.chats, group.replicas[1].outlier.ejected
            finally:
                await pool.aclose()

    status, back_chats, ejected = asyncio.run(main())
    assert status == 200
    assert back_chats == 2  # the failure that ejected it, then the waiter as its probe
    assert not ejected
    assert any(line.endswith("answered its probe request: back in rotation") for line in lines)


def test_requests_whose_deadlines_pass_as_slots_change_hands_all_end() -> None:
    """A replica that never answers, two slots, a 1 s deadline, requests arriving in a burst:
    each slot is freed by one request's deadline just as others' deadlines pass in the queue.
    Every request ends with its 3007, and nothing is left held."""

    async def main() -> tuple[list[int], int, int, int]:
        with sick_server("hang") as hang:
            settings = {**FAST, "request_timeout_s": 1, "eject_after": 0}
            replica_config = {"url": hang.url, "max_running_requests": 2}
            config = parse_pool_config({MODEL: replica_config}, settings)
            pool = ModelPool(config, progress=lambda line: None)
            try:
                assert await pool.wait_ready(MODEL, 30)
                group = pool.group(MODEL)
                tasks = []
                for i in range(48):
                    tasks.append(asyncio.ensure_future(_read(pool, stream=i % 3 == 0)))
                    for _ in range(i % 5):
                        await asyncio.sleep(0)
                _, pending = await asyncio.wait(tasks, timeout=GUARD_S)
                codes = [t.result() for t in tasks if t.done()]
                for task in pending:
                    task.cancel()
                await asyncio.sleep(0)
                return codes, len(pending), len(group.replicas[0].leases), group.queued
            finally:
                await pool.aclose()

    codes, pending, leases, queued = asyncio.run(main())
    assert (pending, leases, queued) == (0, 0, 0)
    assert set(codes) == {errors.timed_out().code.code}
