"""A replica that is alive but makes no progress costs its requests seconds, not their deadline.

Real ember model servers launched by the pool, with a fault injected at startup
(``fault_site/sitecustomize.py``): a wedged engine step (the thread lives, the HTTP loop
answers), a startup that hangs its event loop after the port is bound, and a replacement process
stopped (SIGSTOP) before it even listens (review 22's probes). Before, a wedged engine kept
``/health`` at 200 and its requests waited for ``request_timeout_s`` (600 s); a hung start held
queued requests for ``startup_timeout_s`` (600 s). Now the stalled server's ``/health`` answers
503 naming the stall and the pool fails the request with 3040 and restarts it; a start that does
not answer ``unhealthy_after`` probes in a row (or is stopped) is a failed start: 3043 for the
queued request, and the next attempt serves.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.launch import EMBER_ROOT
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.replica import Replica, State
from tests.bindings.ai.support import GLM, SMALL_SERVER, tiny_checkpoints

CHAT = "/v1/chat/completions"
SHORT = {"model": GLM, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
GUARD_S = 120  # keeps a regression from hanging the suite (it would wait 600 s); never the measure
FAULT_SITE = Path(__file__).parent / "fault_site"
# Probes every 0.2 s (0.5 s to answer), two failures in a row: a sick replica is seen in ~1 s.
FAST = {
    "health_interval_s": 0.2,
    "health_timeout_s": 0.5,
    "unhealthy_after": 2,
    "restart_backoff_s": 0.2,
}


def _config(glm: Path, env: dict[str, str], *args: str):  # noqa: ANN202
    env = {"PYTHONPATH": os.pathsep.join([str(FAULT_SITE), str(EMBER_ROOT)]), **env}
    models = {GLM: {"checkpoint": str(glm), "args": [*SMALL_SERVER, *args], "env": env}}
    return parse_pool_config(models, FAST)


async def _until(condition, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + GUARD_S
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def test_a_stalled_engine_fails_its_request_with_3040_and_is_restarted(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    wedge = tmp_path_factory.mktemp("stall") / "wedge"
    config = _config(glm, {"EMBER_TEST_WEDGE": str(wedge)}, "--health-check-timeout", "1")
    lines: list[str] = []

    async def main() -> UpstreamFailed:
        pool = ModelPool(config, progress=lines.append)
        try:
            group = pool.group(GLM)
            group.start()
            await _until(lambda: group.replicas[0].state is State.READY, "ready")
            wedge.touch()  # the next engine step never returns (until the file goes)
            with pytest.raises(UpstreamFailed) as failed:
                await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            wedge.unlink()
            replica = group.replicas[0]
            await _until(lambda: replica.restarts == 1 and replica.state is State.READY, "back")
            answer = await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            assert answer.status == 200, answer
            return failed.value
        finally:
            await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3040 and error.code.status == 503, error
    message = str(error)
    assert "failed its health checks (/health answered 503: no engine step finished" in message
    assert "1 waiting (--health-check-timeout 1 s)" in message, message
    # The replica's own warning reached the operator's log.
    assert any("warning: the engine is stalled: no engine step" in line for line in lines), lines


def _hung_start(
    tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], fault
) -> tuple[UpstreamFailed, list[str]]:  # noqa: ANN001
    """Start one replica, let ``fault(replica)`` hang its first start; a request sent meanwhile
    must fail with the start failure, and the next start must serve."""
    glm, _ = tiny_checkpoints(tmp_path_factory)
    lines: list[str] = []

    async def main() -> UpstreamFailed:
        pool = ModelPool(_config(glm, env), progress=lines.append)
        try:
            group = pool.group(GLM)
            group.start()
            replica = group.replicas[0]
            injected = asyncio.ensure_future(fault(replica))
            with pytest.raises(UpstreamFailed) as failed:
                await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            await injected
            await _until(lambda: replica.state is State.READY, "the next start to serve")
            answer = await asyncio.wait_for(pool.post(GLM, CHAT, SHORT, RequestOptions()), GUARD_S)
            assert answer.status == 200, answer
            return failed.value
        finally:
            await pool.aclose()

    error = asyncio.run(main())
    assert error.code.code == 3043 and error.code.status == 500, error
    assert "start attempt 1 of 3 failed and is retried" in str(error), error
    return error, lines


def test_a_start_that_stops_answering_after_it_listens_is_a_failed_start(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    hang = tmp_path_factory.mktemp("hang") / "hang-loading"
    hang.touch()

    async def release_after_first_start(replica: Replica) -> None:
        # The first start is hung until it is killed; the next one must load.
        await _until(lambda: replica.start_failure is not None, "the hung start to fail")
        hang.unlink()

    error, lines = _hung_start(
        tmp_path_factory, {"EMBER_TEST_HANG_LOADING": str(hang)}, release_after_first_start
    )
    assert "hung while loading: it does not answer (ReadTimeout" in str(error), error
    assert any("failed to start (attempt 1 of 3): hung while loading" in x for x in lines), lines


def test_a_start_stopped_before_it_listens_is_a_failed_start(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Review 22's probe: the replacement is SIGSTOPped while it imports (its port not bound:
    every probe is refused, as for a slow import); its stopped state tells them apart."""

    async def stop_at_spawn(replica: Replica) -> None:
        await _until(lambda: replica.process is not None and replica.process.pid, "the spawn")
        assert replica.process is not None and replica.process.pid is not None
        os.kill(replica.process.pid, signal.SIGSTOP)

    error, _ = _hung_start(tmp_path_factory, {}, stop_at_spawn)
    assert "hung while loading: it is stopped (ConnectError" in str(error), error
