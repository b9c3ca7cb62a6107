"""A replica that is up but sick (hangs, fails, answers garbage) fails requests clearly.

Issue 5's promise: a replica that dies fails its in-flight requests with a clear error, errors
carry Workers AI's codes, and nothing hangs. The sick replicas are attached by URL (a supported
way to serve a model) and speak raw HTTP (``sick_server.py``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from tests.models.pool.sick_server import MODEL, sick_server

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**BODY, "stream": True}
FAST = {"health_interval_s": 0.05, "health_timeout_s": 1, "unhealthy_after": 2}
GUARD_S = 60  # keeps a regression from hanging the suite


def _pool(url: str, **settings: object) -> ModelPool:
    config = parse_pool_config({MODEL: {"url": url}}, {**FAST, **settings})
    return ModelPool(config, progress=lambda line: None)


async def _until(condition) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.02)


def test_a_stream_whose_replica_never_answers_times_out_and_leaves_the_pool() -> None:
    async def main() -> UpstreamFailed:
        with sick_server("hang") as sick:
            pool = _pool(sick.url, request_timeout_s=1)
            try:
                with pytest.raises(UpstreamFailed) as failed:
                    stream = await asyncio.wait_for(
                        pool.stream(MODEL, "/v1/chat/completions", STREAM, RequestOptions()),
                        GUARD_S,
                    )
                    await stream.aclose()
                assert sick.chats == 1
                assert pool.group(MODEL).outstanding == 0
                # The replica was told: the pool hung up on the connection of the request.
                await _until(lambda: sick.open_chats == 0)
                return failed.value
            finally:
                await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3007 and error.code.status == 408, error


def test_a_stream_and_a_post_time_out_alike() -> None:
    """The non-streamed request against the same replica: the same 3007 (the reference)."""

    async def main() -> UpstreamFailed:
        with sick_server("hang") as sick:
            pool = _pool(sick.url, request_timeout_s=1)
            try:
                with pytest.raises(UpstreamFailed) as failed:
                    await asyncio.wait_for(
                        pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions()), GUARD_S
                    )
                assert pool.group(MODEL).outstanding == 0
                await _until(lambda: sick.open_chats == 0)
                return failed.value
            finally:
                await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3007 and error.code.status == 408, error


def test_an_answer_that_is_not_json_is_a_replica_failure_not_a_success() -> None:
    async def main() -> UpstreamFailed:
        with sick_server("garbage") as sick:
            pool = _pool(sick.url)
            try:
                with pytest.raises(UpstreamFailed) as failed:
                    await asyncio.wait_for(
                        pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions()), GUARD_S
                    )
                assert pool.group(MODEL).outstanding == 0
                return failed.value
            finally:
                await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3040 and error.code.status == 503, error
    assert 'replica 1 answered invalid JSON: "{not json at all"' in str(error), error


def test_a_stream_event_that_is_not_json_ends_the_stream_with_a_replica_failure() -> None:
    async def main() -> tuple[list[str], UpstreamFailed]:
        with sick_server("garbage") as sick:
            pool = _pool(sick.url)
            try:
                events = await asyncio.wait_for(
                    pool.stream(MODEL, "/v1/chat/completions", STREAM, RequestOptions()), GUARD_S
                )
                seen: list[str] = []
                with pytest.raises(UpstreamFailed) as failed:
                    async for data in events:
                        seen.append(data)
                assert pool.group(MODEL).outstanding == 0
                return seen, failed.value
            finally:
                await pool.aclose()

    seen, error = asyncio.run(main())
    assert seen == [], seen  # neither the garbage nor the [DONE] after it
    assert error.code.code == 3040 and error.code.status == 503, error
    assert 'replica 1 answered invalid JSON in its stream: "{garbage"' in str(error), error
