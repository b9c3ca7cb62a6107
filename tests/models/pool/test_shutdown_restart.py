"""Once shutdown has begun (``ember serve``'s HTTP drain, before the pool's own stop), a replica
that dies is not started again: its in-flight requests get the usual clear 3040, later ones
the 3040 saying the pool is shutting down, and nothing new is launched."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.replica import State
from tests.bindings.ai.support import GLM, KIMI, models_section, tiny_checkpoints

CHAT = "/v1/chat/completions"
SHORT = {"model": GLM, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
LONG = {**SHORT, "max_tokens": 2000, "ignore_eos": True, "stream": True}
GUARD_S = 120  # keeps a regression from hanging the suite; never the measure


def test_a_replica_that_dies_after_shutdown_began_is_not_restarted(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    glm, kimi = tiny_checkpoints(tmp_path_factory)
    config = parse_pool_config(
        models_section(glm, kimi), {"restart_backoff_s": 0.05, "health_interval_s": 0.2}
    )
    lines: list[str] = []

    async def main() -> tuple[UpstreamFailed, UpstreamFailed, UpstreamFailed, State]:
        pool = ModelPool(config, progress=lines.append)
        try:
            assert await pool.wait_ready(GLM, GUARD_S), lines
            replica = pool.group(GLM).replicas[0]
            stream = await pool.stream(GLM, CHAT, LONG, RequestOptions())
            await stream.__anext__()

            pool.begin_shutdown()
            # Requests in flight on a live replica go on being served through the drain.
            answer = await pool.post(GLM, CHAT, SHORT, RequestOptions())
            assert answer.status == 200, answer

            assert replica.process is not None and replica.process.pid is not None
            os.killpg(replica.process.pid, signal.SIGKILL)
            with pytest.raises(UpstreamFailed) as in_flight:
                async for _ in stream:
                    pass
            # Long enough for the restart backoff to have passed many times over.
            await asyncio.sleep(1.0)
            with pytest.raises(UpstreamFailed) as later:
                await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            # A model nobody used yet is not started either (lazy start, during the drain).
            with pytest.raises(UpstreamFailed) as lazy:
                await asyncio.wait_for(pool.post(KIMI, CHAT, SHORT, RequestOptions()), GUARD_S)
            return in_flight.value, later.value, lazy.value, replica.state
        finally:
            started = time.monotonic()
            await asyncio.wait_for(pool.aclose(), GUARD_S)
            assert time.monotonic() - started < GUARD_S

    in_flight, later, lazy, state = asyncio.run(main())
    assert in_flight.code.code == 3040, in_flight
    assert "replica 1 was killed by signal 9 while serving" in str(in_flight), in_flight
    assert later.code.code == 3040 and later.code.status == 503, later
    assert "is not restarted: the model pool is shutting down" in str(later), later
    assert lazy.code.code == 3040 and "shutting down" in str(lazy), lazy
    assert state is not State.STARTING and state is not State.READY, state
    launches = [line for line in lines if ": starting (" in line]
    assert len(launches) == 1, launches  # GLM's first start; no restart, no Kimi
    assert not any("restarting in" in line for line in lines), lines
