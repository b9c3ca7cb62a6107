"""``GrammarBuilds`` shares its builder between callers and bounds its cache by bytes
(review26 H2): one caller's many distinct schemas no longer queue in front of everybody
else's, and the grammars kept are bounded by what they hold, measured, not by their count."""

from __future__ import annotations

import asyncio
import tracemalloc

from ember.models.constrain.grammar_size import grammar_bytes
from ember.models.constrain.session import ConstraintSpec, compile_grammar
from ember.models.server.grammar_builds import GrammarBuilds
from tests.models.server.test_grammar_builds import VOCAB, Builder, run, spec, until


def test_another_callers_build_waits_behind_one_build_per_caller_not_the_whole_queue() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder)  # the server's defaults

    async def main(builds: GrammarBuilds) -> None:
        greedy = [
            asyncio.create_task(builds.grammar(spec(i), f"a{i}", caller="tenant-a"))
            for i in range(12)
        ]
        await until(builder.entered.is_set)
        other = asyncio.create_task(builds.grammar(spec(100), "b0", caller="tenant-b"))
        await until(lambda: builds.pending == 13)
        builder.gate.set()
        assert all(g is not None for g in await asyncio.gather(other, *greedy))

    run(main, builds)
    order = [s.schema["enum"][0] for s in builder.started]
    assert len(order) == 13
    # tenant-a's first build was running and (at most) its second handed to the executor;
    # tenant-b's comes next, not after tenant-a's twelve.
    assert order.index("v100") <= 2, order


def test_callers_take_turns_and_each_callers_builds_keep_their_order() -> None:
    builder = Builder(blocked=True)
    builds = GrammarBuilds(VOCAB, build=builder, max_pending=1)

    async def main(builds: GrammarBuilds) -> None:
        first = asyncio.create_task(builds.grammar(spec(0), "x", caller="x"))
        await until(builder.entered.is_set)
        waits = [
            asyncio.create_task(builds.grammar(spec(10 * c + i), f"{c}{i}", caller=str(c)))
            for c in (1, 2)
            for i in range(1, 4)
        ]
        await until(lambda: builds.pending == 7)
        builder.gate.set()
        await asyncio.gather(first, *waits)

    run(main, builds)
    order = [s.schema["enum"][0] for s in builder.started]
    assert order == ["v0", "v11", "v21", "v12", "v22", "v13", "v23"]


def _sized_spec(properties: int) -> ConstraintSpec:
    schema = {
        "type": "object",
        "properties": {f"p{j}": {"type": "string"} for j in range(properties)},
    }
    return ConstraintSpec(json="schema", schema=schema)


def test_a_grammars_measured_size_is_what_building_it_kept() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        grammar = compile_grammar(_sized_spec(400), VOCAB)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    measured = grammar_bytes(grammar)
    assert kept / 2 <= measured <= kept * 2, (measured, kept)
    assert grammar_bytes(compile_grammar(_sized_spec(4), VOCAB)) < measured / 10


def test_the_cache_keeps_grammars_within_its_bytes() -> None:
    one = grammar_bytes(compile_grammar(_sized_spec(200), VOCAB))
    builds = GrammarBuilds(VOCAB, capacity_bytes=int(one * 2.5))

    async def main(builds: GrammarBuilds) -> None:
        specs = [_sized_spec(200 + i) for i in range(4)]  # distinct, about the same size
        for i, s in enumerate(specs):
            assert await builds.grammar(s, f"r{i}") is not None
            assert builds.cached_bytes <= builds.capacity_bytes
        kept = [builds.cached(s) is not None for s in specs]
        assert kept == [False, False, True, True]
        # One larger than the whole budget serves its request and is not kept.
        big = _sized_spec(2000)
        assert await builds.grammar(big, "big") is not None
        assert builds.cached(big) is None and builds.cached(specs[3]) is not None

    run(main, builds)
