"""AsyncEngine's hold: a step waits for the requests of a batch being formed (announced ones,
a burst's stragglers), within its bounds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from ember.errors import BackendError
from ember.models.engine.async_engine import AsyncEngine
from ember.models.engine.config import EngineConfig
from ember.models.engine.llm_engine import LLMEngine
from ember.models.engine.sequence import StopCriteria
from tests.models.engine.toy_models import ToyConfig, ToyModel

T = TypeVar("T")


@pytest.fixture
def toy() -> ToyModel:
    return ToyModel(ToyConfig(kind="mla"), seed=4)


def _run(front: AsyncEngine, main: Callable[[], Awaitable[T]], bound: float) -> T:
    """Run ``main()`` within ``bound`` seconds, then shut the engine down, whatever happened."""
    try:
        return asyncio.run(asyncio.wait_for(main(), bound))
    finally:
        front.shutdown()


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


async def _count_tokens(
    front: AsyncEngine,
    name: str,
    started: asyncio.Event | None = None,
    *,
    prompt: tuple[int, ...] = (3, 4, 5),
    max_tokens: int = 20,
) -> int:
    """Run a request, setting ``started`` at its first tokens; how many tokens it got."""
    count = 0
    async for out in front.generate(name, list(prompt), StopCriteria(max_tokens=max_tokens)):
        count += len(out.new_token_ids)
        if started is not None:
            started.set()
    return count


async def _newcomers_beside_one_running(
    front: AsyncEngine, names: list[str], spacing_s: float
) -> list[list[int]]:
    """One request decodes (prefilled alone); ``names`` are announced, then submitted
    ``spacing_s`` apart; their tokens."""
    running = front.generate("running", [4, 5], StopCriteria(max_tokens=200))
    await running.__anext__()  # it decodes from now on
    for name in names:
        front.expect(name)
    tasks = []
    for name in names:
        tasks.append(asyncio.ensure_future(_three_tokens(front, name)))
        await asyncio.sleep(spacing_s)
    results = await asyncio.gather(*tasks)
    await running.aclose()
    return list(results)


def test_expected_requests_join_one_step(toy: ToyModel) -> None:
    # Requests announced with expect() and submitted one by one while another request decodes
    # (the engine would step between them) all start in the same step: the engine waits for them.
    front, firsts = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)
    names = [f"r{i}" for i in range(6)]

    # between submissions the engine thread would run steps
    results = _run(front, lambda: _newcomers_beside_one_running(front, names, 0.005), 60)
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
        return await _count_tokens(front, "ok", prompt=(3, 4))

    assert _run(front, main, 30) == 20
    assert not front.is_running


def test_forget_ends_the_hold_at_once(toy: ToyModel) -> None:
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> int:
        front.expect("refused")
        front.forget("refused")
        return await _count_tokens(front, "ok", prompt=(3, 4))

    assert _run(front, main, 30) == 20


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
        count = await _count_tokens(front, "first", prompt=(3, 4), max_tokens=2)
        front.expect("never")
        return count + await _count_tokens(front, "ok", prompt=(5, 6))

    assert _run(front, main, 30) == 22


def test_one_announced_request_does_not_hold_a_larger_batch(toy: ToyModel) -> None:
    # Three requests decode; one announced request that never comes (and may count for 60 s,
    # holds bounded only by hold_max_s = 60 s) does not hold their steps: a newcomer next to a
    # running batch waits a step, the batch does not wait for it.
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, expect_for_s=60.0)

    async def main() -> list[int]:
        started = [asyncio.Event() for _ in range(3)]
        tasks = [asyncio.ensure_future(_count_tokens(front, f"r{i}", started[i])) for i in range(3)]
        for event in started:
            await event.wait()
        front.expect("never")
        return await asyncio.gather(*tasks)

    assert _run(front, main, 30) == [20, 20, 20]


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

    results = _run(front, main, 60)
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

    assert _run(front, main, 30) == 3


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

    results = _run(front, main, 60)
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

    results = _run(front, main, 60)
    assert [len(tokens) for tokens in results] == [3] * 5
    assert set(names) in firsts, f"first tokens per step: {[s for s in firsts if s]}"


def test_a_lone_request_or_a_newcomer_pair_never_waits_for_the_gap(toy: ToyModel) -> None:
    # With a gap of 60 s (holds bounded only by hold_max_s = 60 s), a lone request from idle and
    # two newcomers arriving together next to three running requests step at once: neither is a
    # batch being formed, and waiting for the gap would not let them finish in the bound.
    front, _ = _held_engine(toy, hold_max_s=60.0, hold_steps=None, burst_gap_s=60.0)

    async def main() -> list[int]:
        counts = [await _count_tokens(front, "lone")]
        running = []
        for i in range(3):  # one at a time: each a newcomer next to those already running
            started = asyncio.Event()
            running.append(asyncio.ensure_future(_count_tokens(front, f"run{i}", started)))
            await started.wait()
        newcomers = [asyncio.ensure_future(_count_tokens(front, f"new{i}")) for i in range(2)]
        return counts + list(await asyncio.gather(*running, *newcomers))

    assert _run(front, main, 30) == [20] * 6


def test_a_hold_next_to_one_short_request_grows_with_the_newcomers(toy: ToyModel) -> None:
    # One request came first and decodes alone (steps of ~50 ms here); six announced newcomers
    # are submitted 40 ms apart. Two steps (~100 ms, the default bound) would spread them over
    # several steps; six newcomers per running request allow twelve, and all start together.
    front, firsts = _held_engine(toy, step_s=0.05, hold_max_s=60.0, expect_for_s=60.0)
    names = [f"r{i}" for i in range(6)]

    results = _run(front, lambda: _newcomers_beside_one_running(front, names, 0.04), 60)
    assert all(len(tokens) == 3 for tokens in results)
    assert set(names) in firsts, f"first tokens per step: {[s for s in firsts if s]}"
