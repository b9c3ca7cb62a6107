"""Closing the gateway's schema lane while a job runs (review42 LOW-2): the running job finishes
with the compile worker still attached, and a job queued behind it is answered ``LaneClosed`` (a
3040 "retry"), where it ran after the worker was detached, compiling its schemas in the
supervisor's own process while it shut down."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

from ember.bindings.ai.dialects import Upstream, upstream_request
from ember.bindings.ai.failures import failure_of
from ember.bindings.ai.schema_lane import LaneClosed, SchemaLane
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA

MODEL = "@cf/meta/llama-3.1-8b-instruct"


def _body() -> dict:
    # A fresh pattern: compiled now, not found in the process's automaton cache.
    pattern = f"^[a-f0-9]{{40}}-{uuid.uuid4().hex}$"
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    return {
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
    }


def test_close_finishes_the_running_job_on_the_worker_and_refuses_the_queued_one(
    own_compile_worker: None,
) -> None:
    started, release = threading.Event(), threading.Event()
    attached: list[bool] = []  # whether the worker was attached once A's schemas compiled
    ran_b: list[bool] = []

    def parse_a() -> Upstream:
        started.set()
        release.wait(60)  # the lane's thread is busy with A while the lane closes
        built = upstream_request(MODEL, _body(), "workers", stream=False)
        attached.append(SHARED_AUTOMATA.worker is not None)
        return built

    def parse_b() -> Upstream:
        ran_b.append(True)
        return upstream_request(MODEL, _body(), "workers", stream=False)

    async def main() -> tuple[object, BaseException | None]:
        lane = SchemaLane(compile_worker=True)
        worker = SHARED_AUTOMATA.worker
        assert worker is not None
        a = asyncio.ensure_future(lane.run("A", parse_a))
        await asyncio.to_thread(started.wait, 60)
        b = asyncio.ensure_future(lane.run("B", parse_b))  # another tenant: queued behind A
        await asyncio.sleep(0.05)  # B submitted to the lane's thread
        closing = asyncio.ensure_future(lane.aclose())
        await asyncio.sleep(0.05)  # aclose has begun
        release.set()
        await closing
        outcome_a = await a
        try:
            await b
            return outcome_a, None
        except Exception as refused:  # noqa: BLE001 - the test looks at what it is
            return outcome_a, refused
        finally:
            assert SHARED_AUTOMATA.worker is None and worker.pid is None  # detached, stopped

    answered, refused = asyncio.run(main())
    assert isinstance(answered, Upstream)
    assert attached == [True]  # compiled by the worker, not in this process after its detach
    assert isinstance(refused, LaneClosed) and ran_b == []
    failure = failure_of(refused, MODEL)
    assert failure.code.code == 3040 and "shutting down" in failure.description


def test_a_call_cancelled_by_its_caller_is_still_a_cancellation() -> None:
    # Only the lane's own close turns a cancelled job into LaneClosed.
    started, release = threading.Event(), threading.Event()

    def parse_a() -> str:
        started.set()
        release.wait(60)
        return "a"

    async def main() -> None:
        lane = SchemaLane()
        a = asyncio.ensure_future(lane.run("A", parse_a))
        await asyncio.to_thread(started.wait, 60)
        b = asyncio.ensure_future(lane.run("B", lambda: "b"))
        await asyncio.sleep(0.05)
        b.cancel()
        with pytest.raises(asyncio.CancelledError):
            await b
        release.set()
        assert await a == "a"
        await lane.aclose()

    asyncio.run(main())
