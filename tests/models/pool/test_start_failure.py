"""A replica that cannot start because of its configuration: a permanent error, not capacity.

``args: ["--bogus-flag"]`` makes every launch of ``ember models serve`` exit with code 2. The
request must fail with 3043/500 (not the retryable 3040), naming the config key and the
server's own error line, as soon as its first start failed (attempt 1 of 3); the pool goes on
trying in the background, and once the round failed, later requests get the same error at
once, without a new launch, until the retry delay (which grows with each failed round) has
passed.
"""

from __future__ import annotations

import asyncio
import time

from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.tenant import Tenant
from ember.models.pool.config import parse_pool_config
from ember.models.pool.replica import Replica, State
from tests.bindings.ai.support import GLM, tiny_checkpoints

KEY = f'ai.models."{GLM}".args'
GUARD_S = 120  # keeps a regression from hanging the suite; never the measure


async def _until_failed(replica: Replica) -> None:
    deadline = time.monotonic() + GUARD_S
    while replica.state is not State.FAILED:
        assert time.monotonic() < deadline, replica.state
        await asyncio.sleep(0.02)


def test_a_replica_that_cannot_start_is_a_permanent_error(tmp_path_factory) -> None:  # noqa: ANN001
    glm, _ = tiny_checkpoints(tmp_path_factory)
    config = parse_pool_config(
        {GLM: {"checkpoint": str(glm), "args": ["--bogus-flag"]}},
        {"restart_backoff_s": 0.05, "max_restart_backoff_s": 60.0},
    )
    lines: list[str] = []

    def launches() -> int:
        return sum(": starting (" in line for line in lines)

    async def main() -> tuple[AIRequestFailed, int, list[AIRequestFailed], int, int, float]:
        gateway = AIGateway(GatewayConfig(config, project_config=False), progress=lines.append)
        tenant = Tenant.alone("t")
        try:
            # The first request waits for the first start (lazy), and hears of its failure.
            try:
                await gateway.run(tenant, GLM, {"prompt": "hi"}, RunOptions())
            except AIRequestFailed as exc:
                first, first_launches = exc, launches()
            replica = gateway.pool.group(GLM).replicas[0]
            await _until_failed(replica)  # the pool tried on in the background
            failures: list[AIRequestFailed] = []
            for _ in range(2):
                try:
                    await gateway.run(tenant, GLM, {"prompt": "hi"}, RunOptions())
                except AIRequestFailed as exc:
                    failures.append(exc)
            assert replica.state is State.FAILED
            launched = launches()
            restarts, delay = replica.restarts, replica.retry_delay_s
            # Once the delay has passed (moved back here, not slept), a request tries one
            # more start, waits for it, and hears that it failed too; the next delay is twice
            # as long.
            replica.failed_at -= delay
            try:
                await gateway.run(tenant, GLM, {"prompt": "hi"}, RunOptions())
            except AIRequestFailed as exc:
                assert "failed to start 4 times in a row" in exc.failure.message
                assert "tried again in 120 s" in exc.failure.message
            assert launches() == launched + 1
            assert replica.state is State.FAILED and replica.retry_delay_s == 2 * delay
            return first, first_launches, failures, launched, restarts, delay
        finally:
            await gateway.aclose()

    first, first_launches, failures, launched, restarts, delay = asyncio.run(main())
    assert first_launches == 1, lines  # not kept waiting through the other two starts
    assert len(failures) == 2
    for exc in [first, *failures]:
        failure = exc.failure
        assert failure.code.code == 3043 and failure.status == 500, failure.message
        assert not failure.code.retryable
        message = failure.message
        assert message.startswith(f"3043: Model {GLM} cannot start: replica 1 exited with code 2")
        assert "ember: error: No such option '--bogus-flag'." in message  # the server's own line
        assert KEY in message and "ember.yaml" in message
    assert "start attempt 1 of 3 failed and is retried " in first.failure.message
    for exc in failures:
        assert "failed to start 3 times in a row and is tried again in 60 s" in exc.failure.message
    # The requests after the round launched nothing: three launches, then the error at once.
    assert launched == 3, lines
    assert restarts == 2
    assert delay == 60.0


def test_an_exception_building_a_replicas_command_is_a_failed_start() -> None:
    """Whatever goes wrong before the process runs (a command that cannot be built, a start
    that raises) is a failed start the requests hear about (3043), never a waiter left hanging
    until its queue timeout."""
    import httpx
    import pytest

    from ember.models.pool.admission import ModelGroup
    from ember.models.pool.config import PoolSettings, ReplicaConfig
    from ember.models.pool.errors import UpstreamFailed

    lines: list[str] = []

    def command():  # noqa: ANN202 - the replica's command factory
        raise ValueError("the command cannot be built")

    async def main() -> UpstreamFailed:
        settings = PoolSettings(restart_backoff_s=0.05, queue_timeout_s=600.0)
        async with httpx.AsyncClient() as http:
            group = ModelGroup(GLM, 8, settings.queue_timeout_s)
            config = ReplicaConfig(file="ember.yaml", key=f'ai.models."{GLM}"')
            replica = Replica(GLM, 0, config, command, settings, http, group.changed, lines.append)
            group.replicas.append(replica)
            with pytest.raises(UpstreamFailed) as failed:
                # The guard only keeps a regression from hanging the suite.
                await asyncio.wait_for(group.acquire(None, False), 60)
            await _until_failed(replica)
            await replica.stop()
            return failed.value

    error = asyncio.run(main())
    assert error.code.code == 3043, error
    assert "the command cannot be built" in str(error)
    assert "start attempt 1 of 3 failed" in str(error)
    assert any("failed to start 3 times" in line for line in lines), lines


def test_a_checkpoint_failure_names_the_checkpoint_key_even_with_args_set() -> None:
    """The walkthrough's 3043 said "check ...args" for a directory with no config.json."""
    from ember.models.pool.config import parse_pool_config as parse
    from ember.models.pool.start_failure import StartFailure

    serving = parse({GLM: {"checkpoint": "/nowhere/glm", "args": ["--torch-threads", "1"]}})
    replica = serving.serving(GLM).replicas[0]
    missing = StartFailure(
        reason="exited with code 1 while loading",
        error_line="failed to load /nowhere/glm: '/nowhere/glm' is neither a catalog id nor a "
        "checkpoint directory (no config.json there); catalog ids: ...",
        attempts=3,
        retry_in_s=60,
    )
    text = missing.describe("replica 1", replica)
    assert f'check ai.models."{GLM}".checkpoint in ember.yaml' in text, text
    assert ".args" not in text, text
    flag = StartFailure("exited with code 2", "No such option '--bogus'.", 3, 60)
    assert f'check ai.models."{GLM}".args in ember.yaml' in flag.describe("replica 1", replica)


def test_a_retrying_failure_says_which_attempt_and_what_is_left_of_the_wait() -> None:
    """A failed start in a round that goes on: attempt k of n, and when the next start is,
    counted from the failure (a request a while later is not told the whole backoff)."""
    from ember.models.pool.config import parse_pool_config as parse
    from ember.models.pool.start_failure import StartFailure

    replica = parse({GLM: {"checkpoint": "/nowhere/glm"}}).serving(GLM).replicas[0]
    failure = StartFailure(
        "exited with code 1 while loading", "failed to load /nowhere/glm", 1, 2.0, of=3, at=100.0
    )
    assert failure.retrying
    text = failure.describe("replica 1", replica, now=100.5)
    assert "; start attempt 1 of 3 failed and is retried in 1.5 s;" in text, text
    assert f'check ai.models."{GLM}".checkpoint in ember.yaml' in text, text
    assert "failed and is retried now;" in failure.describe("replica 1", replica, now=102.0)
    brief = failure.describe_briefly("replica 1", now=100.5)
    assert brief == (
        "replica 1 failed to start (attempt 1 of 3) and is retried in 1.5 s; the platform's "
        "operator has the details in its log"
    ), brief
    assert "/nowhere" not in brief  # a tenant does not see how the replica runs
