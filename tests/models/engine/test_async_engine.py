"""AsyncEngine: concurrent streams from asyncio, cancellation, errors."""

from __future__ import annotations

import asyncio
import time

import pytest

from ember.errors import BackendError, InvalidModelInput
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


def _held_engine(
    toy: ToyModel, *, step_s: float = 0.0, **hold: float | None
) -> tuple[AsyncEngine, list[set[str]]]:
    """An AsyncEngine whose steps are recorded: per step, the requests that got their first
    token in it. Each step with work lasts at least ``step_s`` (a larger model's)."""
    config = EngineConfig(max_total_tokens=1024, page_size=4, max_num_seqs=8, max_model_len=512)
    llm = LLMEngine(toy, toy.kv_layout(), config)
    firsts: list[set[str]] = []
    step = llm.step

    def recorded() -> list:
        outputs = step()
        if outputs and step_s:
            time.sleep(step_s)
        firsts.append({o.request_id for o in outputs if o.usage.completion_tokens == 1})
        return outputs

    llm.step = recorded  # type: ignore[method-assign]
    return AsyncEngine(llm, **hold), firsts


async def _three_tokens(front: AsyncEngine, name: str) -> list[int]:
    """Run a request of three tokens from ``[1, 2, 3]``; its tokens."""
    tokens = []
    async for out in front.generate(name, [1, 2, 3], StopCriteria(max_tokens=3)):
        tokens.extend(out.new_token_ids)
    return tokens


async def _twenty_tokens(
    front: AsyncEngine, name: str, started: asyncio.Event | None = None
) -> int:
    """Run a request of 20 tokens from ``[3, 4, 5]``, setting ``started`` at its first; the
    count of tokens."""
    count = 0
    async for out in front.generate(name, [3, 4, 5], StopCriteria(max_tokens=20)):
        count += len(out.new_token_ids)
        if started is not None:
            started.set()
    return count


def test_expected_requests_join_one_step(toy: ToyModel) -> None:
    # Requests announced with expect() and submitted one by one while another request decodes
    # (the engine would step between them) all start in the same step: the engine waits for them.
    front, firsts = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)
    names = [f"r{i}" for i in range(6)]

    async def main() -> list[list[int]]:
        running = front.generate("running", [4, 5], StopCriteria(max_tokens=200))
        await running.__anext__()  # it decodes from now on
        for name in names:
            front.expect(name)
        tasks = []
        for name in names:
            tasks.append(asyncio.ensure_future(_three_tokens(front, name)))
            await asyncio.sleep(0.005)  # the engine thread would run steps meanwhile
        results = await asyncio.gather(*tasks)
        await running.aclose()
        return results

    try:
        results = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        front.shutdown()
    assert all(len(tokens) == 3 for tokens in results)
    assert set(names) in firsts, f"first tokens per step: {[s for s in firsts if s]}"


def test_an_announced_request_that_never_comes_stops_holding(toy: ToyModel) -> None:
    # expect() without generate(): the engine waits for it only expect_for_s, and forget() ends
    # the wait at once; a hold of 60 s per step would not let the requests finish in the bound.
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=0.05)

    async def main() -> int:
        front.expect("never")
        front.expect("refused")
        front.forget("refused")
        count = 0
        async for out in front.generate("ok", [3, 4], StopCriteria(max_tokens=20)):
            count += len(out.new_token_ids)
        return count

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == 20
    finally:
        front.shutdown()
    assert not front.is_running


def test_forget_ends_the_hold_at_once(toy: ToyModel) -> None:
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> int:
        front.expect("refused")
        front.forget("refused")
        count = 0
        async for out in front.generate("ok", [3, 4], StopCriteria(max_tokens=20)):
            count += len(out.new_token_ids)
        return count

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == 20
    finally:
        front.shutdown()


def test_a_stop_while_holding_fails_the_open_requests(toy: ToyModel) -> None:
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> None:
        stream = front.generate("open", [1, 2], StopCriteria(max_tokens=400))
        await stream.__anext__()
        front.expect("late")  # the next step waits for it...
        await asyncio.sleep(0.05)
        front.shutdown()  # ...and the stop ends that wait
        with pytest.raises(BackendError, match="shut down"):
            async for _ in stream:
                pass

    asyncio.run(asyncio.wait_for(main(), 30))
    assert not front.is_running


def test_a_hold_lasts_at_most_two_steps_by_default(toy: ToyModel) -> None:
    # An announcement that never comes and may count for 60 s: with holds bounded only by
    # hold_max_s (60 s) each step would wait a minute; bounded by the last step's duration
    # (hold_steps=2, the default) the running request finishes.
    front, _ = _held_engine(toy, hold_max_s=60.0, expect_for_s=60.0)

    async def main() -> int:
        count = 0
        async for out in front.generate("first", [3, 4], StopCriteria(max_tokens=2)):
            count += len(out.new_token_ids)
        front.expect("never")
        async for out in front.generate("ok", [5, 6], StopCriteria(max_tokens=20)):
            count += len(out.new_token_ids)
        return count

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == 22
    finally:
        front.shutdown()


def test_one_announced_request_does_not_hold_a_larger_batch(toy: ToyModel) -> None:
    # Three requests decode; one announced request that never comes (and may count for 60 s,
    # holds bounded only by hold_max_s = 60 s) does not hold their steps: a newcomer next to a
    # running batch waits a step, the batch does not wait for it.
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> list[int]:
        started = [asyncio.Event() for _ in range(3)]
        tasks = [
            asyncio.ensure_future(_twenty_tokens(front, f"r{i}", started[i])) for i in range(3)
        ]
        for event in started:
            await event.wait()
        front.expect("never")
        return await asyncio.gather(*tasks)

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == [20, 20, 20]
    finally:
        front.shutdown()


def test_a_batch_from_idle_waits_for_what_its_loop_has_not_taken_in_yet(toy: ToyModel) -> None:
    # The first request of a burst is submitted while the loop is still busy (here: a blocking
    # callback, as taking a request in is) and the second is only announced after it, from a
    # callback already queued. Stepping at once would prefill the first alone; the engine
    # instead lets the loop run up to that announcement, and both start in one step.
    front, firsts = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> list[list[int]]:
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Future[list[int]]] = []

        def second_arrives() -> None:
            front.expect("second")
            tasks.append(asyncio.ensure_future(_three_tokens(front, "second")))

        tasks.append(asyncio.ensure_future(_three_tokens(front, "first")))
        await asyncio.sleep(0)  # "first" is submitted
        loop.call_soon(time.sleep, 0.2)  # the loop is busy; the engine thread is not
        loop.call_soon(second_arrives)
        await asyncio.sleep(0.3)
        return list(await asyncio.gather(*tasks))

    try:
        results = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        front.shutdown()
    assert [len(tokens) for tokens in results] == [3, 3]
    assert {"first", "second"} in firsts, f"first tokens per step: {[s for s in firsts if s]}"


def test_forget_wakes_a_hold_that_waits_for_that_request(toy: ToyModel) -> None:
    # A running request's steps held for an announced one (holds of up to 60 s): refusing the
    # announced request ends the hold at once, not when the announcement would have expired.
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> int:
        stream = front.generate("open", [1, 2], StopCriteria(max_tokens=4))
        await stream.__anext__()
        front.expect("refused")  # the engine holds its next step for it...
        await asyncio.sleep(0.1)
        front.forget("refused")  # ...until it is refused
        return len([out async for out in stream])

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == 3
    finally:
        front.shutdown()


def test_requests_submitted_together_during_a_hold_all_join_its_step(toy: ToyModel) -> None:
    # The engine holds for three announced requests; the first is submitted alone, the other
    # two in one event-loop callback. The hold wakes on the second's command, and by then the
    # third is no longer expected either (its command is queued): it must be applied before the
    # step, not left for the next one.
    front, firsts = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)
    names = ["a", "b", "c"]

    async def main() -> list[list[int]]:
        for name in names:
            front.expect(name)
        tasks = [asyncio.ensure_future(_three_tokens(front, "a"))]
        await asyncio.sleep(0.1)  # the engine has "a" and holds for "b" and "c"
        tasks += [asyncio.ensure_future(_three_tokens(front, name)) for name in ("b", "c")]
        return list(await asyncio.gather(*tasks))

    try:
        results = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        front.shutdown()
    assert [len(tokens) for tokens in results] == [3, 3, 3]
    assert set(names) in firsts, f"first tokens per step: {[s for s in firsts if s]}"


def test_a_burst_that_arrives_spread_out_starts_in_one_step(toy: ToyModel) -> None:
    # Two requests arrive together, three more 50 ms apart, none announced (as when a proxy
    # starts a burst's requests one after the other): the batch being formed waits while they
    # keep coming within the gap, and all five start in one step.
    front, firsts = _held_engine(
        toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0, burst_gap_s=0.5
    )
    names = [f"r{i}" for i in range(5)]

    async def main() -> list[list[int]]:
        tasks = [asyncio.ensure_future(_three_tokens(front, name)) for name in names[:2]]
        for name in names[2:]:
            await asyncio.sleep(0.05)  # the engine thread would step meanwhile
            tasks.append(asyncio.ensure_future(_three_tokens(front, name)))
        return list(await asyncio.gather(*tasks))

    try:
        results = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        front.shutdown()
    assert [len(tokens) for tokens in results] == [3] * 5
    assert set(names) in firsts, f"first tokens per step: {[s for s in firsts if s]}"


def test_a_lone_request_or_a_newcomer_pair_never_waits_for_the_gap(toy: ToyModel) -> None:
    # With a gap of 60 s (holds bounded only by hold_max_s = 60 s), a lone request from idle and
    # two newcomers arriving together next to three running requests step at once: neither is a
    # batch being formed, and waiting for the gap would not let them finish in the bound.
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, burst_gap_s=60.0)

    async def main() -> list[int]:
        counts = [await _twenty_tokens(front, "lone")]
        running = []
        for i in range(3):  # one at a time: each a newcomer next to those already running
            started = asyncio.Event()
            running.append(asyncio.ensure_future(_twenty_tokens(front, f"run{i}", started)))
            await started.wait()
        newcomers = [asyncio.ensure_future(_twenty_tokens(front, f"new{i}")) for i in range(2)]
        return counts + list(await asyncio.gather(*running, *newcomers))

    try:
        assert asyncio.run(asyncio.wait_for(main(), 30)) == [20] * 6
    finally:
        front.shutdown()


def test_a_hold_next_to_one_short_request_grows_with_the_newcomers(toy: ToyModel) -> None:
    # One request came first and decodes alone (steps of ~50 ms here); six announced newcomers
    # are submitted 40 ms apart. Two steps (~100 ms, the default bound) would spread them over
    # several steps; six newcomers per running request allow twelve, and all start together.
    front, firsts = _held_engine(toy, step_s=0.05, hold_max_s=60.0, expect_for_s=60.0)
    names = [f"r{i}" for i in range(6)]

    async def main() -> list[list[int]]:
        running = front.generate("running", [4, 5], StopCriteria(max_tokens=200))
        await running.__anext__()  # prefilled alone; it decodes from now on
        for name in names:
            front.expect(name)
        tasks = []
        for name in names:
            tasks.append(asyncio.ensure_future(_three_tokens(front, name)))
            await asyncio.sleep(0.04)
        results = await asyncio.gather(*tasks)
        await running.aclose()
        return results

    try:
        results = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        front.shutdown()
    assert all(len(tokens) == 3 for tokens in results)
    assert set(names) in firsts, f"first tokens per step: {[s for s in firsts if s]}"
