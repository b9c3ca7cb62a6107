"""A replica that served, died and cannot start again: its requests hear so after one failed
start, not after every attempt of the restart loop (the chaos walk measured 37-48 s).

Real ember model servers from a copy of the tiny GLM checkpoint; the copy is moved away while
they serve, so every restart fails the way a checkpoint made unreadable does. As SGLang's and
vLLM's routers answer a request with no healthy worker at once, a model with no ready replica
whose latest start failed refuses its queued and new requests with the 3043 naming that failure
(attempt k of n, when it is retried) while the pool goes on retrying; a request that arrives
while a restart is merely under way still waits for it, and a ready sibling serves throughout.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.replica import Replica, State
from tests.bindings.ai.support import GLM, models_section, tiny_checkpoints

CHAT = "/v1/chat/completions"
SHORT = {"model": GLM, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
GUARD_S = 240  # keeps a regression from hanging the suite; never the measure


def _launches(lines: list[str], number: int) -> int:
    return sum(f"{GLM} replica {number}: starting (" in line for line in lines)


async def _until(condition, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def _kill(replica: Replica) -> None:
    assert replica.process is not None and replica.process.pid is not None
    os.killpg(replica.process.pid, signal.SIGKILL)


def test_a_replica_that_cannot_restart_fails_its_queue_after_one_failed_start(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    scratch = tmp_path_factory.mktemp("restart-loop")
    checkpoint, away = scratch / "glm", scratch / "glm.away"
    shutil.copytree(glm, checkpoint)
    config = parse_pool_config(
        models_section(checkpoint, replicas=2),
        {"restart_backoff_s": 0.2, "max_restart_backoff_s": 60.0, "health_interval_s": 0.2},
    )
    lines: list[str] = []

    async def main() -> tuple[UpstreamFailed, int, UpstreamFailed]:
        pool = ModelPool(config, progress=lines.append)
        try:
            group = pool.group(GLM)
            first, second = group.replicas
            group.start()
            await _until(lambda: all(r.state is State.READY for r in group.replicas), "ready")
            Path(checkpoint).rename(away)  # every start from now on fails while loading

            # Replica 1 dies and fails to come back; replica 2 serves throughout.
            _kill(first)
            await _until(lambda: first.start_failure is not None, "replica 1's failed start")
            answer = await pool.post(GLM, CHAT, SHORT, RequestOptions())
            assert answer.status == 200 and first.state is not State.READY, answer

            # Replica 2 dies too. A request sent now waits for its restart (it has not failed
            # yet), and hears of the failure as soon as that one start fails.
            _kill(second)
            await _until(lambda: second.state is not State.READY, "replica 2's death seen")
            with pytest.raises(UpstreamFailed) as queued:
                await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            restarts_seen = _launches(lines, 2) - 1
            # A new request meanwhile fails at once with the same 3043, while the pool retries.
            with pytest.raises(UpstreamFailed) as new:
                await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)

            # The pool kept retrying in the background: three starts each, then FAILED.
            await _until(lambda: all(r.state is State.FAILED for r in group.replicas), "FAILED")
            assert _launches(lines, 1) == 4 and _launches(lines, 2) == 4, lines

            # The checkpoint is back: once the retry delay passed (moved back here, not slept),
            # a request starts them again and waits for the load.
            away.rename(checkpoint)
            for replica in group.replicas:
                replica.failed_at -= replica.retry_delay_s
            answer = await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            assert answer.status == 200, answer
            return queued.value, restarts_seen, new.value
        finally:
            await pool.aclose()

    queued, restarts_seen, new = asyncio.run(main())
    for error in (queued, new):
        assert error.code.code == 3043 and error.code.status == 500, error
        message = str(error)
        assert message.startswith(f"3043: Model {GLM} cannot start: replica "), message
        assert "exited with code 1 while loading" in message, message
        assert "no config.json there" in message or "neither a catalog id" in message, message
        assert "check ai.models" in message and ".checkpoint in ember.yaml" in message, message
    # The queued request failed with the first failed restart, not the third.
    assert restarts_seen == 1, (restarts_seen, lines)
    assert "start attempt 1 of 3 failed" in str(queued), queued
    assert any("replica 2 failed to start (attempt 1 of 3): exited" in line for line in lines)
