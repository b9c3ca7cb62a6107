"""Request ids whose client left (``draining.py``): a new request under the id waits for the old
one to leave the engine, and an abort sent meanwhile reaches it (review24)."""

from __future__ import annotations

import asyncio
import time

from ember.models.engine.async_engine import AsyncEngine
from ember.models.engine.config import EngineConfig
from ember.models.engine.draining import DrainingIds
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel


def test_a_wait_ends_free_aborted_or_busy() -> None:
    async def main() -> None:
        drains = DrainingIds()
        assert await drains.wait("x", lambda: False) == "free"  # nothing drains
        drains.leave("x")
        assert "x" in drains
        assert await drains.wait("x", lambda: False, limit_s=0.01) == "busy"
        waiter = asyncio.ensure_future(drains.wait("x", lambda: False))
        await asyncio.sleep(0.01)
        drains.mark_aborted(["x"])
        assert await waiter == "aborted"
        waiter = asyncio.ensure_future(drains.wait("x", lambda: False))
        await asyncio.sleep(0.01)
        drains.mark_aborted(["y"])  # another id: nothing
        drains.release("x")
        assert await waiter == "free"
        drains.leave("x")
        first = asyncio.ensure_future(drains.wait("x", lambda: False))
        await asyncio.sleep(0.01)
        drains.mark_aborted(["x"])  # reaches the request waiting now, not one that comes later
        later = asyncio.ensure_future(drains.wait("x", lambda: False, limit_s=0.05))
        assert await first == "aborted" and await later == "busy"  # review25
        drains.mark_aborted(None)  # nobody waits: no mark is left for a later waiter
        drains.leave("x")
        assert await drains.wait("x", lambda: True) == "free"  # the engine stopped: no wait

    asyncio.run(main())


def test_an_abort_while_a_request_waits_for_its_id_ends_it() -> None:
    """The new request was in neither the engine nor its streams while it waited, so the
    engine's abort (``/abort_request``, ``abort_all``) missed it and it ran to its end."""
    toy = ToyModel(ToyConfig(kind="mla"), seed=4)
    forward = toy.forward

    def slow(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a real model's step takes ms
        time.sleep(0.03)
        return forward(*args, **kwargs)

    toy.forward = slow
    config = EngineConfig(max_total_tokens=1024, page_size=4, max_num_seqs=8, max_model_len=512)
    engine = AsyncEngine(LLMEngine(toy, toy.kv_layout(), config))

    async def main(abort_all: bool) -> list[object]:
        stream = engine.generate("x", [1, 2, 3], StopCriteria(max_tokens=400))
        await stream.__anext__()
        await stream.aclose()  # the client left: "x" drains until the next step

        async def again() -> list[object]:
            return [o async for o in engine.generate("x", [4], StopCriteria(max_tokens=60))]

        waiter = asyncio.ensure_future(again())
        while "x" not in engine._drains._waiting and not waiter.done():
            await asyncio.sleep(0.001)
        engine.abort_all() if abort_all else engine.abort("x")
        return await waiter

    try:
        for abort_all in (False, True):
            outputs = asyncio.run(main(abort_all))
            # It never ran, or (had the id been freed first) it was aborted in the engine.
            tokens = sum(len(o.new_token_ids) for o in outputs)
            assert tokens < 60 and all(o.finish_reason in (None, "abort") for o in outputs)
    finally:
        engine.shutdown()
