"""The pool's start path: ``ModelGroup.acquire_now`` (no task) against ``acquire`` (the
reference), and a closed replica stream that makes its error only when read again.

Two groups in the same random states take the same random requests, one through each path:
the fast path must lease the same replica, refuse with the same error, and queue (a ``Ticket``)
exactly where the reference would. Replicas are real ``Replica`` objects whose state the test
sets; they are never started (their supervising task is a pending future).
"""

from __future__ import annotations

import asyncio
import random

import pytest

from ember.models.pool.admission import ModelGroup, Ticket
from ember.models.pool.config import PoolSettings, ReplicaConfig
from ember.models.pool.errors import CapacityExceeded, UpstreamFailed
from ember.models.pool.pool import RequestOptions
from ember.models.pool.replica import Lease, Replica, State

MODEL = "@cf/zai-org/glm-4.7-flash"
STATES = (State.READY, State.READY, State.READY, State.STARTING, State.DEAD, State.FAILED)


def _group(rng: random.Random, loop: asyncio.AbstractEventLoop) -> ModelGroup:
    group = ModelGroup(MODEL, max_queued=rng.randint(0, 3), queue_timeout=60)
    for index in range(rng.randint(1, 4)):
        config = ReplicaConfig(url=f"http://127.0.0.1:{9000 + index}", max_running_requests=2)
        replica = Replica(
            MODEL, index, config, None, PoolSettings(), None, group.changed, lambda line: None
        )  # type: ignore[arg-type]
        replica._task = loop.create_future()  # type: ignore[assignment]  # never supervised
        group.replicas.append(replica)
    return group


def _mirror(source: ModelGroup, target: ModelGroup) -> None:
    """Give ``target``'s replicas the states and outstanding leases of ``source``'s."""
    for mine, theirs in zip(source.replicas, target.replicas, strict=True):
        theirs.state = mine.state
        theirs.failed_at = mine.failed_at
        theirs.leases = {Lease(theirs, lease.session) for lease in mine.leases}


def _outcome(value: object) -> object:
    if isinstance(value, Lease):
        return ("lease", value.replica.index)
    if isinstance(value, BaseException):
        return (type(value).__name__, str(value))
    return value


async def _reference(group: ModelGroup, session: str | None, reject: bool) -> object:
    """What ``acquire`` does at once: a lease, an error, or None when it queued."""
    task = asyncio.ensure_future(group.acquire(session, reject))
    for _ in range(3):
        await asyncio.sleep(0)
    if not task.done():
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return None
    return task.exception() or task.result()


@pytest.mark.parametrize("seed", range(6))
def test_acquire_now_matches_acquire_on_random_states(seed: int) -> None:
    rng = random.Random(seed * 7919 + 17)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        compared = 0
        for _ in range(40):
            fast, slow = _group(rng, loop), None
            slow = ModelGroup(MODEL, fast.max_queued, fast.queue_timeout)
            for replica in fast.replicas:
                twin = Replica(
                    MODEL,
                    replica.index,
                    replica.config,
                    None,
                    PoolSettings(),
                    None,
                    slow.changed,
                    lambda line: None,
                )  # type: ignore[arg-type]
                twin._task = loop.create_future()  # type: ignore[assignment]
                slow.replicas.append(twin)
            for replica in fast.replicas:
                replica.state = rng.choice(STATES)
                replica.failed_at = loop.time() if replica.state is State.FAILED else 0.0
                for _ in range(rng.randint(0, 2)):
                    replica.leases.add(Lease(replica, None))
            for _ in range(rng.randint(1, 6)):
                _mirror(fast, slow)
                session = rng.choice([None, None, "ses_a", "ses_b"])
                reject = rng.random() < 0.3
                try:
                    got: object = fast.acquire_now(session, reject)
                except (CapacityExceeded, UpstreamFailed) as exc:
                    got = exc
                expected = await _reference(slow, session, reject)
                if isinstance(got, Ticket):
                    assert fast.queued == 1
                    fast.cancel(got)  # as the reference gave up its place
                    assert fast.queued == 0
                    got = None
                assert _outcome(got) == _outcome(expected), (seed, session, reject)
                compared += 1
                if isinstance(got, Lease) and rng.random() < 0.3:
                    got.release()
        assert compared > 100

    asyncio.run(main())


def test_a_closed_stream_read_again_fails_with_the_closed_error() -> None:
    """``aclose`` no longer builds the error up front; a later read still raises it."""
    from tests.models.pool.gate_server import gate_servers
    from tests.models.pool.test_admission import BODY, _pool

    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a])
            assert await pool.wait_ready(MODEL, 10)
            a.open()
            for read in ("anext", "next_batch"):
                stream = await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
                await stream.aclose()
                await stream.aclose()  # idempotent
                with pytest.raises(UpstreamFailed, match="the stream was closed"):
                    if read == "anext":
                        await stream._events.__anext__()
                    else:
                        await stream._events.next_batch()
            assert pool.group(MODEL).outstanding == 0
            await pool.aclose()

    asyncio.run(main())
