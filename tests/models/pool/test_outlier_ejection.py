"""A replica whose requests keep failing is ejected from rotation, then probed back in.

The mixed pool of the chaos walkthrough: a launched CPU replica (a real ember model server) and an
attached one that is up (its ``/health`` answers) but sick. Without ejection the sick one kept
its share of requests for ever; with it, after ``eject_after`` failures in a row every request
goes to the healthy replica (outlier.py).
"""

from __future__ import annotations

import asyncio

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.replica import State
from tests.bindings.ai.support import SMALL_SERVER, tiny_checkpoints
from tests.models.pool.sick_server import MODEL, sick_server

CHAT = "/v1/chat/completions"
SHORT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
STREAM = {**SHORT, "stream": True}
FAST = {"health_interval_s": 0.05, "health_timeout_s": 1, "unhealthy_after": 2}
GUARD_S = 120  # keeps a regression from hanging the suite


async def _request(pool: ModelPool, stream: bool) -> bool:
    """One request, read to its end; whether it succeeded."""
    try:
        if not stream:
            answer = await asyncio.wait_for(
                pool.post(MODEL, CHAT, SHORT, RequestOptions()), GUARD_S
            )
            return answer.status == 200
        events = await asyncio.wait_for(pool.stream(MODEL, CHAT, STREAM, RequestOptions()), GUARD_S)
        async for data in events:
            if data == "[DONE]":
                break
        await events.aclose()
        return True
    except UpstreamFailed:
        return False


@pytest.mark.parametrize(("mode", "stream"), [("e500", False), ("hang", True)])
def test_a_sick_attached_replica_is_ejected_and_the_healthy_one_serves(
    tmp_path_factory: pytest.TempPathFactory, mode: str, stream: bool
) -> None:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    lines: list[str] = []

    async def main() -> tuple[list[bool], int, bool]:
        with sick_server(mode) as sick:
            replicas = [{"args": SMALL_SERVER}, {"url": sick.url}]
            settings = {**FAST, "request_timeout_s": 2, "eject_after": 2, "eject_time_s": 3600}
            models = {MODEL: {"checkpoint": str(glm), "replicas": replicas}}
            config = parse_pool_config(models, settings)
            pool = ModelPool(config, progress=lines.append)
            try:
                group = pool.group(MODEL)
                group.start()
                while not all(r.state is State.READY for r in group.replicas):
                    assert not any(r.state is State.FAILED for r in group.replicas), lines
                    await asyncio.sleep(0.05)
                outcomes = [await _request(pool, stream) for _ in range(12)]
                (status,) = [row for row in pool.status() if row.model_id == MODEL]
                return outcomes, sick.chats, status.replicas[1].ejected
            finally:
                await pool.aclose()

    outcomes, sick_chats, ejected = asyncio.run(main())
    assert sick_chats == 2, (outcomes, lines)  # the threshold, and not one request more
    assert outcomes.count(False) == 2, outcomes
    assert all(outcomes[-8:]), outcomes  # after the ejection, every request succeeds
    assert ejected
    (line,) = [line for line in lines if "ejected" in line]
    assert "replica 2 ejected for 3600 s" in line, line


def test_a_probe_that_succeeds_puts_the_replica_back() -> None:
    lines: list[str] = []

    async def main() -> tuple[int, bool]:
        with sick_server("e500") as sick:
            settings = {**FAST, "eject_after": 1, "eject_time_s": 0.05}
            config = parse_pool_config({MODEL: {"url": sick.url}}, settings)
            pool = ModelPool(config, progress=lines.append)
            try:
                assert await pool.wait_ready(MODEL, 30)
                assert not await _request(pool, stream=False)
                replica = pool.group(MODEL).replicas[0]
                assert replica.outlier.ejected
                sick.mode = "ok"
                await asyncio.sleep(0.1)  # past the ejection time: the next request probes
                assert await _request(pool, stream=False)
                return sick.chats, replica.outlier.ejected
            finally:
                await pool.aclose()

    chats, ejected = asyncio.run(main())
    assert chats == 2 and not ejected
    assert any(line.endswith("answered its probe request: back in rotation") for line in lines)


def test_a_lone_ejected_replica_still_gets_requests_and_they_fail_clearly() -> None:
    """Not refused by the pool: each request reaches the replica and gets its 500 (which the
    gateway sends as 3040 naming the status, as any replica's 500)."""

    async def main() -> tuple[list[int], int, bool]:
        with sick_server("e500") as sick:
            settings = {**FAST, "eject_after": 1, "eject_time_s": 3600}
            config = parse_pool_config({MODEL: {"url": sick.url}}, settings)
            pool = ModelPool(config, progress=lambda line: None)
            try:
                statuses = []
                for _ in range(3):
                    answer = await asyncio.wait_for(
                        pool.post(MODEL, CHAT, SHORT, RequestOptions()), GUARD_S
                    )
                    statuses.append(answer.status)
                return statuses, sick.chats, pool.group(MODEL).replicas[0].outlier.ejected
            finally:
                await pool.aclose()

    statuses, chats, ejected = asyncio.run(main())
    assert statuses == [500, 500, 500] and chats == 3 and ejected
