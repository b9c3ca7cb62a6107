"""A request of ``n`` choices takes n slots of a replica (its server runs n sequences for it),
against the protocol-level double of ``test_admission.py``."""

from __future__ import annotations

import asyncio

from ember.models.pool.pool import RequestOptions, sequences
from tests.models.pool.gate_server import gate_servers
from tests.models.pool.test_admission import BODY, MODEL, _pool, _wait

PATH = "/v1/chat/completions"


def test_sequences_reads_n_where_each_api_puts_it() -> None:
    assert sequences({"n": 4}) == 4
    assert sequences({"text": "x", "sampling_params": {"n": 3}}) == 3
    assert sequences({}) == sequences({"n": True}) == sequences({"n": 0}) == 1
    assert sequences({"n": 10**6}) == sequences({"n": "4"}) == 1  # the replica refuses those


def test_n_choices_take_n_slots_and_keep_their_turn() -> None:
    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], slots=4)
            assert await pool.wait_ready(MODEL, 10)
            group = pool.group(MODEL)
            three = await pool.stream(MODEL, PATH, {**BODY, "n": 3}, RequestOptions())
            assert group.outstanding == 3
            # 3 + 2 > 4 slots: the second waits; a single request behind it, which would fit,
            # waits behind it rather than keep it waiting.
            two = asyncio.create_task(pool.stream(MODEL, PATH, {**BODY, "n": 2}, RequestOptions()))
            await _wait(lambda: group.queued == 1)
            one = asyncio.create_task(pool.stream(MODEL, PATH, BODY, RequestOptions()))
            await _wait(lambda: group.queued == 2)
            assert a.held == 1 and group.outstanding == 3
            a.open()
            assert [e async for e in three][-1] == "[DONE]"
            for task in (two, one):
                assert [e async for e in await task][-1] == "[DONE]"
            assert group.outstanding == 0
            await pool.aclose()

    asyncio.run(main())


def test_more_choices_than_slots_run_alone_on_an_idle_replica() -> None:
    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], slots=4)
            assert await pool.wait_ready(MODEL, 10)
            group = pool.group(MODEL)
            eight = await pool.stream(MODEL, PATH, {**BODY, "n": 8}, RequestOptions())
            await _wait(lambda: a.held == 1)
            assert group.outstanding == 8
            waiting = asyncio.create_task(pool.stream(MODEL, PATH, BODY, RequestOptions()))
            await _wait(lambda: group.queued == 1)
            a.open()
            assert [e async for e in eight][-1] == "[DONE]"
            assert [e async for e in await waiting][-1] == "[DONE]"
            await pool.aclose()

    asyncio.run(main())
