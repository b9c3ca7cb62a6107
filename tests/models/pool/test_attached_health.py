"""An attached replica that cannot be reached fails requests at once, and says so in the log.

SGLang's router takes a worker that fails its health checks out of rotation and answers 503
while none is healthy; the pool does the same for servers it attaches to by URL (it cannot
restart them): after ``unhealthy_after`` failed probes the replica is DEAD, waiting requests fail
with 3040 naming the URL, new ones fail at once, and each change is one progress line.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.launch import free_port
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.replica import State
from tests.models.pool.gate_server import gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
# queue_timeout_s is the default 600 s: a request that gets any answer did not wait for it.
FAST = {"health_interval_s": 0.05, "health_timeout_s": 1, "unhealthy_after": 2}


def _pool(url: str, lines: list[str]) -> ModelPool:
    config = parse_pool_config({MODEL: {"url": url}}, FAST)
    return ModelPool(config, progress=lines.append)


async def _until(condition) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.02)


def test_a_url_that_never_answers_fails_requests_instead_of_holding_them() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    lines: list[str] = []

    async def main() -> UpstreamFailed:
        pool = _pool(url, lines)
        try:
            with pytest.raises(UpstreamFailed) as failed:
                # The guard keeps a regression from hanging the suite for 600 s.
                await asyncio.wait_for(
                    pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions()), 60
                )
            # Later requests fail at once, without waiting for another round of probes.
            with pytest.raises(UpstreamFailed):
                pool.group(MODEL).acquire_now(None, False)
            return failed.value
        finally:
            await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3040 and error.code.status == 503, error
    assert f"replica 1 at {url} is unreachable" in str(error), error
    assert any(url in line and "unreachable" in line for line in lines), lines


def test_after_an_attached_replica_dies_new_requests_fail_until_it_is_back() -> None:
    lines: list[str] = []

    async def main() -> UpstreamFailed:
        with gate_servers("a") as (a,):
            a.open()
            pool = _pool(a.url, lines)
            try:
                answer = await pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions())
                assert answer.status == 200
                a.healthy = False
                replica = pool.group(MODEL).replicas[0]
                await _until(lambda: replica.state is State.DEAD)
                with pytest.raises(UpstreamFailed) as failed:
                    await asyncio.wait_for(
                        pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions()), 60
                    )
                a.healthy = True
                await _until(lambda: replica.state is State.READY)
                again = await pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions())
                assert again.status == 200
                return failed.value
            finally:
                await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3040, error
    assert "is unreachable (/health answered 503)" in str(error), error
    changes = [line for line in lines if "attached" in line]
    assert any("unreachable" in line for line in changes), lines
    assert any(line.endswith("is ready again") for line in changes), lines


def test_an_attached_sglang_server_whose_scheduler_stalls_is_taken_out() -> None:
    """SGLang's /health answers 200 on older servers while the scheduler is stuck; its
    /health_generate fails (no scheduler output for SGLANG_HEALTH_CHECK_TIMEOUT): an SGLang
    replica is probed there, an ember one on /health (where ember names its stalls)."""
    lines: list[str] = []

    async def main() -> UpstreamFailed:
        with gate_servers(MODEL) as (a,):
            a.open()
            config = parse_pool_config({MODEL: {"url": a.url, "backend": "sglang"}}, FAST)
            pool = ModelPool(config, progress=lines.append)
            try:
                assert await pool.wait_ready(MODEL, 30)
                a.generating = False  # /health still answers 200
                replica = pool.group(MODEL).replicas[0]
                await _until(lambda: replica.state is State.DEAD)
                with pytest.raises(UpstreamFailed) as failed:
                    await asyncio.wait_for(
                        pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions()), 60
                    )
                a.generating = True
                await _until(lambda: replica.state is State.READY)
                return failed.value
            finally:
                await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3040, error
    assert "(/health_generate answered 503)" in str(error), error


def test_an_attached_server_under_another_name_is_a_warning() -> None:
    lines: list[str] = []

    async def main() -> None:
        with gate_servers("org/Other-Model") as (a,):
            a.open()
            pool = _pool(a.url, lines)
            try:
                assert await pool.wait_ready(MODEL, 30)
            finally:
                await pool.aclose()

    asyncio.run(main())
    (warning,) = [line for line in lines if "warning" in line]
    assert "'org/Other-Model'" in warning and MODEL in warning and "served_model_name" in warning


def test_an_attached_server_listing_this_id_among_others_is_asked_for_it() -> None:
    """A server that lists several models (vLLM's LoRA adapters, aliases) and this id among
    them serves it under this id: no warning, and no switch to the first name it lists."""
    lines: list[str] = []

    async def main() -> str:
        with gate_servers("org/Other-Model") as (a,):
            a.also_lists.append(MODEL)
            a.open()
            pool = _pool(a.url, lines)
            try:
                assert await pool.wait_ready(MODEL, 30)
                answer = await pool.post(MODEL, "/v1/chat/completions", BODY, RequestOptions())
                assert answer.status == 200
                return str(a.seen[-1]["model"])
            finally:
                await pool.aclose()

    asked = asyncio.run(main())
    assert asked == MODEL
    assert not [line for line in lines if "warning" in line], lines
