"""AsyncEngine: concurrent streams from asyncio, cancellation, errors."""

from __future__ import annotations

import asyncio

import pytest

from ember.errors import InvalidModelInput
from ember.models.engine.async_engine import AsyncEngine
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel, greedy_reference


@pytest.fixture
def toy() -> ToyModel:
    return ToyModel(ToyConfig(kind="mla"), seed=4)


@pytest.fixture
def engine(toy: ToyModel):
    config = EngineConfig(max_total_tokens=1024, page_size=4, max_num_seqs=8, max_model_len=512)
    front = AsyncEngine(LLMEngine(toy, toy.kv_layout(), config))
    yield front
    front.shutdown()
    assert not front.is_running


def test_concurrent_streams_match_the_reference(engine: AsyncEngine, toy: ToyModel) -> None:
    prompts = [[i, i + 1, i + 2, 7][: 1 + i % 4] for i in range(6)]

    async def one(i: int) -> tuple[list[int], object]:
        tokens, last = [], None
        async for out in engine.generate(f"r{i}", prompts[i], StopCriteria(max_tokens=6)):
            tokens.extend(out.new_token_ids)
            last = out
        return tokens, last

    async def main():
        return await asyncio.gather(*(one(i) for i in range(6)))

    results = asyncio.run(main())
    for prompt, (tokens, last) in zip(prompts, results, strict=True):
        assert tokens == greedy_reference(toy, prompt, 6)
        assert last.finished and last.finish_reason == "length"
        assert last.usage.completion_tokens == 6 and last.usage.prompt_tokens == len(prompt)


def test_leaving_the_stream_early_aborts_and_frees_pages(engine: AsyncEngine) -> None:
    async def main() -> int:
        count = 0
        stream = engine.generate("gone", [1, 2, 3], StopCriteria(max_tokens=400))
        async for _ in stream:
            count += 1
            if count == 2:
                break
        await stream.aclose()
        # The next request runs only after the abort was applied (commands are FIFO).
        async for _ in engine.generate("next", [4], StopCriteria(max_tokens=1)):
            pass
        return count

    assert asyncio.run(main()) == 2
    stats = engine.engine.stats
    assert stats.generation_tokens < 400, "the abandoned request stopped early"
    assert stats.running == 0 and stats.pages_used == 0


def test_an_id_whose_client_left_is_reusable_at_once_and_gets_none_of_the_old_output(
    engine: AsyncEngine, toy: ToyModel
) -> None:
    """review21: a client leaves and its request id is sent again at once (SGLang's rid, a
    retry): the ended request is still in the engine until its next step collects it. The new
    one waits for that and runs in full, never rejected as in use nor handed the old one's end."""

    async def background(index: int) -> None:  # keeps the engine stepping meanwhile
        stop = StopCriteria(max_tokens=300, ignore_eos=True)
        async for _ in engine.generate(f"bg{index}", [9, 8, 7], stop):
            pass

    async def main() -> None:
        others = [asyncio.ensure_future(background(i)) for i in range(2)]
        for trial in range(20):
            stream = engine.generate("x", [1, 2, 3], StopCriteria(max_tokens=400))
            await stream.__anext__()
            if trial % 2:  # the server's path for a stop string the engine cannot see (review23)
                engine.abort("x", reason="stop")
            await stream.aclose()  # the client went away, or the route returned
            prompt = [4, 5, trial % 7 + 1]
            tokens, last = [], None
            async for out in engine.generate("x", prompt, StopCriteria(max_tokens=5)):
                tokens.extend(out.new_token_ids)
                last = out
            assert tokens == greedy_reference(toy, prompt, 5), trial
            assert last.finish_reason == "length" and last.usage.prompt_tokens == 3
        await asyncio.gather(*others)

    asyncio.run(main())
    stats = engine.engine.stats
    assert stats.running == 0 and stats.pages_used == 0


def test_abort_all_ends_running_and_waiting_requests_with_abort() -> None:
    toy = ToyModel(ToyConfig(kind="mla"), seed=4)
    config = EngineConfig(max_total_tokens=1024, page_size=4, max_num_seqs=1, max_model_len=512)
    engine = AsyncEngine(LLMEngine(toy, toy.kv_layout(), config))

    async def one(request_id: str, started: asyncio.Event) -> tuple[int, str | None]:
        count, reason = 0, None
        async for out in engine.generate(request_id, [1, 2], StopCriteria(max_tokens=400)):
            count += len(out.new_token_ids)
            reason = out.finish_reason
            started.set()
        return count, reason

    async def main() -> list[tuple[int, str | None]]:
        started = asyncio.Event()
        # max_num_seqs=1: one runs, the other waits behind it.
        tasks = [asyncio.create_task(one(f"r{i}", started)) for i in range(2)]
        await started.wait()
        assert sorted(engine.abort_all()) == ["r0", "r1"]
        return await asyncio.gather(*tasks)

    try:
        results = asyncio.run(main())
    finally:
        engine.shutdown()
    assert [reason for _, reason in results] == ["abort", "abort"]
    assert sum(count for count, _ in results) < 400
    stats = engine.engine.stats
    assert (stats.running, stats.waiting, stats.waiting_tokens, stats.pages_used) == (0, 0, 0, 0)


def test_a_cancelled_task_aborts_its_request(engine: AsyncEngine) -> None:
    async def consume(started: asyncio.Event) -> None:
        async for _ in engine.generate("slow", [5, 6], StopCriteria(max_tokens=400)):
            started.set()
            await asyncio.Event().wait()  # a client that stops reading until it is cancelled

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.create_task(consume(started))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async for _ in engine.generate("after", [1], StopCriteria(max_tokens=1)):
            pass

    asyncio.run(main())
    assert engine.engine.stats.generation_tokens < 400


def test_invalid_requests_fail_alone(engine: AsyncEngine) -> None:
    async def main() -> list[int]:
        with pytest.raises(InvalidModelInput, match="prompt"):
            async for _ in engine.generate("long", list(range(600)), StopCriteria(max_tokens=2)):
                pass
        tokens = []
        async for out in engine.generate("ok", [3, 4], StopCriteria(max_tokens=2)):
            tokens.extend(out.new_token_ids)
        return tokens

    assert len(asyncio.run(main())) == 2
