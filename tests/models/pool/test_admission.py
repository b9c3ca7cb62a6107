"""Routing, affinity, the bounded queue, fail-fast and health, against protocol-level doubles."""

from __future__ import annotations

import asyncio
import time

import pytest

from ember.models.pool.config import parse_pool_config
from ember.models.pool.errors import CapacityExceeded, UpstreamFailed
from ember.models.pool.pool import ModelPool, RequestOptions
from ember.models.pool.pooled_stream import PooledStream
from ember.models.pool.replica import State
from tests.models.pool.gate_server import GateServer, gate_servers

MODEL = "@cf/zai-org/glm-4.7-flash"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
FAST = {"health_interval_s": 0.05, "health_timeout_s": 1, "unhealthy_after": 2}


def _pool(doubles: list[GateServer], pool: dict | None = None, **model: object) -> ModelPool:
    replicas = [{"url": d.url, "max_running_requests": model.pop("slots", 8)} for d in doubles]
    config = parse_pool_config({MODEL: {"replicas": replicas, **model}}, {**FAST, **(pool or {})})
    return ModelPool(config, progress=lambda line: None)


async def _wait(condition, timeout: float = 10.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def _first(stream: PooledStream) -> str:
    return await stream.__aiter__().__anext__()


def test_least_outstanding_spreads_and_affinity_pins() -> None:
    async def main() -> None:
        with gate_servers("a", "b") as (a, b):
            pool = _pool([a, b])
            assert await pool.wait_ready(MODEL, 10)
            streams = [
                await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
                for _ in range(4)
            ]
            await _wait(lambda: a.held + b.held == 4)
            assert (a.held, b.held) == (2, 2)
            pinned = RequestOptions(session="ses_1", headers={"x-session-affinity": "ses_1"})
            first = await pool.stream(MODEL, "/v1/chat/completions", BODY, pinned)
            home = first.replica.index
            more = [
                await pool.stream(MODEL, "/v1/chat/completions", BODY, pinned) for _ in range(3)
            ]
            # The session stays on its replica although the other one now has less work.
            assert {s.replica.index for s in more} == {home}
            assert (a.held, b.held) in ((6, 2), (2, 6))
            assert a.headers[-1].get("x-session-affinity") or b.headers[-1].get(
                "x-session-affinity"
            )
            a.open()
            b.open()
            for stream in [*streams, first, *more]:
                assert [e async for e in stream][-1] == "[DONE]"
            assert pool.group(MODEL).outstanding == 0
            await pool.aclose()

    asyncio.run(main())


def test_bounded_queue_backpressure_and_reject_if_busy() -> None:
    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], slots=1, max_queued_requests=1)
            assert await pool.wait_ready(MODEL, 10)
            running = await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
            with pytest.raises(CapacityExceeded) as busy:
                await pool.stream(
                    MODEL, "/v1/chat/completions", BODY, RequestOptions(reject_if_busy=True)
                )
            assert str(busy.value) == "3040: Capacity temporarily exceeded, please try again."
            queued = asyncio.ensure_future(
                pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
            )
            await _wait(lambda: pool.group(MODEL).queued == 1)
            with pytest.raises(CapacityExceeded) as full:
                await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
            assert str(full.value) == "3040: No more data centers to forward the request to"
            a.open()
            assert [e async for e in running][-1] == "[DONE]"
            second = await queued
            assert [e async for e in second][-1] == "[DONE]"
            await pool.aclose()

    asyncio.run(main())


def test_a_waiter_times_out_with_3007_and_a_request_past_its_deadline_too() -> None:
    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], {"queue_timeout_s": 0.3}, slots=1)
            assert await pool.wait_ready(MODEL, 10)
            held = await pool.stream(
                MODEL, "/v1/chat/completions", BODY, RequestOptions(timeout=0.5)
            )
            with pytest.raises(UpstreamFailed) as waited:
                await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
            assert str(waited.value) == "3007: Request timeout"
            with pytest.raises(UpstreamFailed) as late:
                async for _ in held:
                    pass
            assert str(late.value) == "3007: Request timeout"
            assert pool.group(MODEL).outstanding == 0
            await pool.aclose()

    asyncio.run(main())


def test_an_attached_replica_that_goes_unhealthy_fails_its_requests_and_comes_back() -> None:
    async def main() -> None:
        with gate_servers("a", "b") as (a, b):
            pool = _pool([a, b])
            assert await pool.wait_ready(MODEL, 10)
            await _wait(lambda: all(r.state is State.READY for r in pool.group(MODEL).replicas))
            streams = [
                await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
                for _ in range(2)
            ]
            on_a = next(s for s in streams if s.replica.url == a.url)
            on_b = next(s for s in streams if s.replica.url == b.url)
            assert await _first(on_a) and await _first(on_b)
            a.healthy = False
            started = time.monotonic()
            with pytest.raises(UpstreamFailed) as failed:
                async for _ in on_a:
                    pass
            assert time.monotonic() - started < 5
            assert failed.value.code.code == 3040
            assert f"replica 1 at {a.url} is unreachable (/health answered 503)" in str(
                failed.value
            )
            # The other replica keeps serving, and new requests avoid the dead one.
            extra = await pool.stream(MODEL, "/v1/chat/completions", BODY, RequestOptions())
            assert extra.replica.url == b.url
            a.healthy = True
            await _wait(lambda: pool.group(MODEL).replicas[0].state is State.READY)
            b.open()
            for stream in (on_b, extra):
                assert [e async for e in stream][-1] == "[DONE]"
            await pool.aclose()

    asyncio.run(main())


def test_graceful_drain_lets_in_flight_requests_finish() -> None:
    async def main() -> None:
        with gate_servers("a") as (a,):
            pool = _pool([a], {"drain_timeout_s": 5})
            assert await pool.wait_ready(MODEL, 10)
            answer = asyncio.ensure_future(
                pool.post(
                    MODEL, "/v1/chat/completions", {**BODY, "stream": False}, RequestOptions()
                )
            )
            await _wait(lambda: a.held == 1)
            closing = asyncio.ensure_future(pool.aclose())
            await asyncio.sleep(0.2)
            assert not answer.done()  # still running while the pool drains
            a.open()
            result = await answer
            assert result.status == 200 and result.body["model"] == "a"
            await closing
            with pytest.raises(UpstreamFailed):
                pool.group("@cf/moonshotai/kimi-k2.6")

    asyncio.run(main())


def test_attached_server_name_is_learned_and_the_body_renamed() -> None:
    async def main() -> None:
        with gate_servers("served-as-something-else") as (a,):
            pool = _pool([a])
            assert await pool.wait_ready(MODEL, 10)
            a.open()
            answer = await pool.post(
                MODEL, "/v1/chat/completions", {**BODY, "stream": False}, RequestOptions()
            )
            assert answer.status == 200
            assert a.seen[-1]["model"] == "served-as-something-else"
            await pool.aclose()

    asyncio.run(main())


def test_reject_if_busy_waits_for_a_model_still_loading() -> None:
    # rejectIfBusy refuses to queue behind requests that hold every slot. A model that is
    # still loading (ember dev starts it on first use) has nobody in its slots: refusing then
    # would fail the first call of every dev session, which the platform never does.
    async def main() -> None:
        with gate_servers("a") as (a,):
            a.healthy = False  # the replica is up but not ready yet
            pool = _pool([a], slots=1)
            eager = RequestOptions(reject_if_busy=True)
            first = asyncio.ensure_future(pool.stream(MODEL, "/v1/chat/completions", BODY, eager))
            await _wait(lambda: first.done() or pool.group(MODEL).queued == 1)
            assert not first.done(), first.exception()
            a.healthy = True
            running = await first
            # Ready and full: now rejectIfBusy fails fast, as on the platform.
            with pytest.raises(CapacityExceeded):
                await pool.stream(MODEL, "/v1/chat/completions", BODY, eager)
            a.open()
            assert [e async for e in running][-1] == "[DONE]"
            await pool.aclose()

    asyncio.run(main())
