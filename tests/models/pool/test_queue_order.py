"""A request refused a slot keeps its place in the queue: nobody who comes later overtakes it.

The interleaving is driven step by step on one event loop: the refused request, the request
that frees the slot and a later request are made runnable in that order, in one loop turn. A
pool that refuses in one step and enqueues in another lets the later request take the slot
that was freed in between.
"""

from __future__ import annotations

import asyncio

import pytest

from ember.models.pool.pool import RequestOptions
from tests.models.pool.gate_server import gate_servers
from tests.models.pool.test_admission import BODY, MODEL, _pool, _wait

PATH = "/v1/chat/completions"


def _asking(name: str, n: int = 1) -> dict:
    return {**BODY, "n": n, "messages": [{"role": "user", "content": name}]}


@pytest.mark.parametrize("n", [1, 2])
def test_a_refused_request_is_served_before_a_later_one(n: int) -> None:
    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], slots=2, max_queued_requests=4)
            assert await pool.wait_ready(MODEL, 10)
            group = pool.group(MODEL)
            running = await pool.stream(MODEL, PATH, _asking("running", 2), RequestOptions())
            (held,) = group.replicas[0].leases

            async def running_ends() -> None:
                held.release()

            first = asyncio.create_task(
                pool.stream(MODEL, PATH, _asking("first", n), RequestOptions())
            )
            ending = asyncio.create_task(running_ends())
            # Two slots: whichever of 'first' and 'later' gets them first, the other must wait.
            later = asyncio.create_task(
                pool.stream(MODEL, PATH, _asking("later", 2), RequestOptions())
            )
            await ending
            await _wait(lambda: a.held == 2 and group.queued == 1)  # 'running' is still held
            asked = [body["messages"][0]["content"] for body in a.seen]
            assert asked == ["running", "first"]
            a.open()
            for stream in (running, first, later):  # each frees its slots when read to the end
                if isinstance(stream, asyncio.Task):
                    stream = await stream
                assert [e async for e in stream][-1] == "[DONE]"
            assert group.outstanding == 0 and group.queued == 0
            await pool.aclose()

    asyncio.run(main())
