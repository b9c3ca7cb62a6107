"""The pool against real ember model servers it launches: two CPU replicas of the GLM id.

Routing and affinity with real engines, cancellation reaching the engine (its running count
drops), and a replica killed mid-stream: its request fails with a clear error within seconds,
the other replica keeps serving, and the killed one is restarted.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.replica import State
from ember.models.server.metrics import parse_prometheus
from tests.bindings.ai.support import GLM, LoopThread, models_section, tiny_checkpoints, wait_until

CHAT = "/v1/chat/completions"
LONG = {
    "model": GLM,
    "messages": [{"role": "user", "content": "Count."}],
    "max_tokens": 2000,
    "ignore_eos": True,
    "stream": True,
}
SHORT = {"model": GLM, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


class Live:
    def __init__(self, pool: ModelPool, loop: LoopThread, lines: list[str]) -> None:
        self.pool, self.loop, self.lines = pool, loop, lines

    def replicas(self):  # noqa: ANN201
        return self.pool.group(GLM).replicas

    def running(self, index: int) -> float:
        text = httpx.get(self.replicas()[index].url + "/metrics", timeout=10).text
        return parse_prometheus(text)[f'sglang:num_running_reqs{{model_name="{GLM}"}}']


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    models = models_section(glm, replicas=2)
    settings = {"health_interval_s": 0.2, "restart_backoff_s": 0.2}
    lines: list[str] = []
    loop = LoopThread()
    pool = loop.run(_make(parse_pool_config(models, settings), lines))
    try:
        assert loop.run(pool.wait_ready(GLM, 120), timeout=130), lines
        wait_until(lambda: all(r.state is State.READY for r in pool.group(GLM).replicas), "both")
        yield Live(pool, loop, lines)
    finally:
        pids = [r.process.pid for r in pool.group(GLM).replicas if r.process is not None]
        loop.run(pool.aclose())
        loop.close()
        for pid in pids:  # every replica process is gone after aclose
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


async def _make(config, lines: list[str]) -> ModelPool:  # noqa: ANN001
    return ModelPool(config, progress=lines.append)


def test_replicas_launch_with_progress_and_serve_the_id(live: Live) -> None:
    assert any("ready in" in line for line in live.lines)
    assert any("loaded Glm4MoeForCausalLM" in line for line in live.lines)
    for replica in live.replicas():
        served = httpx.get(replica.url + "/v1/models", timeout=10).json()["data"][0]["id"]
        assert served == GLM
    answer = live.loop.run(live.pool.post(GLM, CHAT, SHORT, RequestOptions()))
    assert answer.status == 200 and answer.body["usage"]["completion_tokens"] == 4


def test_a_replicas_warnings_after_ready_reach_the_progress_lines(live: Live) -> None:
    # Startup lines are progress; once serving, only the replica's warnings and errors come
    # through (e.g. a dropped call to an undeclared tool), so ember dev's console shows them.
    answer = live.loop.run(live.pool.post(GLM, CHAT, {**SHORT, "not_a_field": 1}, RequestOptions()))
    assert answer.status == 200
    wait_until(lambda: any("but ignored: not_a_field" in line for line in live.lines), "warning")
    line = next(line for line in live.lines if "but ignored: not_a_field" in line)
    assert line.startswith(f"{GLM}") and "warning: " in line
    assert not any("Decode batch" in line for line in live.lines)  # info stays in the replica


def test_affinity_keeps_a_session_on_one_replica(live: Live) -> None:
    async def main() -> set[int]:
        used = set()
        for _ in range(4):
            stream = await live.pool.stream(
                GLM, CHAT, {**SHORT, "stream": True}, RequestOptions(session="ses_a")
            )
            used.add(stream.replica.index)
            assert [e async for e in stream][-1] == "[DONE]"
        return used

    assert len(live.loop.run(main())) == 1


def test_closing_a_stream_stops_generation_on_the_replica(live: Live) -> None:
    async def start():  # noqa: ANN202
        stream = await live.pool.stream(GLM, CHAT, LONG, RequestOptions())
        await stream.__anext__()
        return stream

    stream = live.loop.run(start())
    index = stream.replica.index
    wait_until(lambda: live.running(index) == 1, "the request to run")
    live.loop.run(stream.aclose())
    wait_until(lambda: live.running(index) == 0, "the replica to drop the request", 10)
    assert live.pool.group(GLM).outstanding == 0


def test_a_replica_killed_mid_stream_fails_its_request_and_restarts(live: Live) -> None:
    async def main() -> tuple[str, float, int, int]:
        stream = await live.pool.stream(GLM, CHAT, LONG, RequestOptions())
        await stream.__anext__()
        victim = stream.replica
        restarts = victim.restarts
        os.killpg(victim.process.pid, signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(UpstreamFailed) as failed:
            async for _ in stream:
                pass
        elapsed = time.monotonic() - killed
        # The other replica keeps serving while the victim restarts.
        answer = await live.pool.post(GLM, CHAT, SHORT, RequestOptions())
        assert answer.status == 200
        return str(failed.value), elapsed, victim.index, restarts

    message, elapsed, index, restarts = live.loop.run(main())
    assert message.startswith("3040: Model @cf/zai-org/glm-4.7-flash failed: ")
    assert "was killed by signal 9 while serving" in message or "connection failed" in message
    assert elapsed < 5
    victim = live.replicas()[index]
    wait_until(lambda: victim.state is State.READY, "the killed replica to restart", 120)
    assert victim.restarts == restarts + 1
    assert any("restarting in" in line for line in live.lines)
    answer = live.loop.run(live.pool.post(GLM, CHAT, SHORT, RequestOptions()))
    assert answer.status == 200
