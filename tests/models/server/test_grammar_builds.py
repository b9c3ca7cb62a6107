"""``GrammarBuilds``: grammars compiled on its own thread, once per spec however many requests
ask, bounded, cancelled when nobody waits any more. The build function is the typed seam: a
wrapper around the real ``compile_grammar`` that records its calls and can block on an event."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from ember.errors import InternalError
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.grammar import Grammar
from ember.models.constrain.session import ConstraintSpec, compile_grammar
from ember.models.constrain.vocab import TokenVocabulary
from ember.models.server.grammar_builds import GrammarBuilds
from tests.models.constrain.fixtures import small_vocab

VOCAB = small_vocab()


def spec(tag: int) -> ConstraintSpec:
    return ConstraintSpec(json="schema", schema={"enum": [f"v{tag}", f"w{tag}"]})


class Builder:
    """``compile_grammar``, recorded (spec tags and threads), held while ``gate`` is clear."""

    def __init__(self, *, blocked: bool = False) -> None:
        self.gate = threading.Event()
        if not blocked:
            self.gate.set()
        self.started: list[ConstraintSpec] = []
        self.entered = threading.Event()
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, spec: ConstraintSpec, vocab: TokenVocabulary) -> Grammar:
        with self._lock:
            self.started.append(spec)
            self.threads.add(threading.current_thread().name)
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        return compile_grammar(spec, vocab)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def run(coro_fn: Callable[[GrammarBuilds], object], builds: GrammarBuilds) -> object:
    try:
        return asyncio.run(coro_fn(builds))  # type: ignore[arg-type]
    finally:
        builds.shutdown()


def test_a_grammar_is_built_on_the_builder_thread_with_its_first_mask_and_then_cached() -> None:
    builder = Builder()
    builds = GrammarBuilds(VOCAB, build=builder)

    async def main(builds: GrammarBuilds) -> None:
        assert builds.cached(spec(1)) is None
        grammar = await builds.grammar(spec(1), "r1")
        assert grammar is not None
        assert grammar.mask_cache, "the initial state's mask comes with the grammar"
        assert builds.cached(spec(1)) is grammar
        assert await builds.grammar(spec(1), "r2") is grammar
        assert builds.pending == 0

    run(main, builds)
    assert len(builder.started) == 1
    assert builder.threads and threading.main_thread().name not in builder.threads


def test_one_build_serves_every_concurrent_request_for_the_same_spec() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder)

    async def main(builds: GrammarBuilds) -> None:
        waiters = [asyncio.create_task(builds.grammar(spec(2), f"r{i}")) for i in range(8)]
        await until(builder.entered.is_set)
        await asyncio.sleep(0.05)  # every waiter has asked by now
        assert builds.pending == 1
        builder.gate.set()
        grammars = await asyncio.gather(*waiters)
        assert all(g is grammars[0] for g in grammars) and grammars[0] is not None

    run(main, builds)
    assert builder.started == [spec(2)]


def test_a_waiter_that_leaves_takes_nothing_with_it_and_the_build_is_kept() -> None:
    """The client went away while its grammar was being built: its wait ends at once, the
    running build finishes (and is cached for a retry), nothing stays pending."""
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder)

    async def main(builds: GrammarBuilds) -> None:
        waiter = asyncio.create_task(builds.grammar(spec(3), "gone"))
        await until(builder.entered.is_set)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        builder.gate.set()
        await until(lambda: builds.pending == 0)
        assert builds.cached(spec(3)) is not None

    run(main, builds)


def test_a_queued_build_nobody_waits_for_is_never_run() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder, threads=1)

    async def main(builds: GrammarBuilds) -> None:
        first = asyncio.create_task(builds.grammar(spec(4), "first"))
        await until(builder.entered.is_set)
        queued = asyncio.create_task(builds.grammar(spec(5), "queued"))
        await until(lambda: builds.pending == 2)
        queued.cancel()
        await asyncio.gather(queued, return_exceptions=True)
        await until(lambda: builds.pending == 1)
        builder.gate.set()
        assert await first is not None
        await until(lambda: builds.pending == 0)

    run(main, builds)
    assert builder.started == [spec(4)], "the cancelled build never started"


def test_builds_past_the_bound_wait_for_a_slot_and_then_complete() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder, threads=1, max_pending=2)

    async def main(builds: GrammarBuilds) -> None:
        waiters = [asyncio.create_task(builds.grammar(spec(10 + i), f"r{i}")) for i in range(5)]
        await until(builder.entered.is_set)
        await asyncio.sleep(0.05)
        assert builds.submitted == 2, "only max_pending builds are handed to the executor"
        assert builds.pending == 5  # the other three wait for a slot, holding no build
        builder.gate.set()
        grammars = await asyncio.gather(*waiters)
        assert all(g is not None for g in grammars)
        assert builds.pending == 0

    run(main, builds)
    assert sorted(s.schema["enum"][0] for s in builder.started) == [f"v{10 + i}" for i in range(5)]


def test_an_unexpected_build_failure_fails_each_waiter_naming_it_and_is_not_cached() -> None:
    calls = []

    def failing(spec: ConstraintSpec, vocab: TokenVocabulary) -> Grammar:
        calls.append(spec)
        if len(calls) == 1:
            raise RecursionError("maximum recursion depth exceeded")
        return compile_grammar(spec, vocab)

    builds = GrammarBuilds(VOCAB, build=failing)

    async def main(builds: GrammarBuilds) -> None:
        results = await asyncio.gather(
            builds.grammar(spec(6), "one"), builds.grammar(spec(6), "two"), return_exceptions=True
        )
        for rid, error in zip(("one", "two"), results, strict=True):
            assert isinstance(error, InternalError), error
            assert rid in str(error) and "RecursionError" in str(error), error
        assert builds.cached(spec(6)) is None and builds.pending == 0
        assert await builds.grammar(spec(6), "three") is not None  # tried again

    run(main, builds)
    assert len(calls) == 2


def test_a_bad_schema_found_by_the_build_stays_the_request_field_error() -> None:
    bad = ConstraintSpec(json="schema", schema={"type": "string", "maxLength": -1})
    builds = GrammarBuilds(VOCAB)

    async def main(builds: GrammarBuilds) -> None:
        with pytest.raises(InvalidRequestField) as raised:
            await builds.grammar(bad, "r")
        assert raised.value.field.endswith("/maxLength"), raised.value.field

    run(main, builds)


def test_abort_by_request_id_ends_that_wait_only() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder)

    async def main(builds: GrammarBuilds) -> None:
        aborted = asyncio.create_task(builds.grammar(spec(7), "a"))
        kept = asyncio.create_task(builds.grammar(spec(7), "b"))
        await until(builder.entered.is_set)
        builds.abort("a")
        assert await aborted is None
        assert not kept.done()
        builder.gate.set()
        assert await kept is not None

    run(main, builds)


def test_abort_all_ends_every_wait_and_cancels_what_has_not_started() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder, threads=1)

    async def main(builds: GrammarBuilds) -> None:
        waiters = [asyncio.create_task(builds.grammar(spec(20 + i), f"r{i}")) for i in range(3)]
        await until(builder.entered.is_set)
        builds.abort_all()
        assert await asyncio.gather(*waiters) == [None, None, None]
        builder.gate.set()
        await until(lambda: builds.pending == 0)

    run(main, builds)
    assert len(builder.started) == 1


def test_shutdown_fails_the_waits_it_cuts_short() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder, threads=1)

    async def main(builds: GrammarBuilds) -> None:
        first = asyncio.create_task(builds.grammar(spec(30), "first"))
        await until(builder.entered.is_set)
        queued = asyncio.create_task(builds.grammar(spec(31), "queued"))
        await until(lambda: builds.submitted == 2)
        builds.shutdown()
        with pytest.raises(InternalError, match="shut"):
            await queued
        builder.gate.set()
        assert await first is not None  # the running build was allowed to finish

    run(main, builds)
