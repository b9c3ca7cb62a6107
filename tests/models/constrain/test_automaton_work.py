"""The request's automaton budget counts what a build costs, not its states (review39 #1): a
wide alternation under a star made every state's target set hundreds of states (7.9 KB a
state held, seconds of CPU within the old state budget), and optional items in a row made
closures quadratic in the pattern. The build counts its work, stops as soon as it passes what
the request has left, and keeps equal closures as one object."""

from __future__ import annotations

import random
import re

import pytest

from ember.models.constrain.automata import MAX_AUTOMATON_WORK, Automata, AutomatonBudgetExceeded
from ember.models.constrain.automaton_cache import AutomatonCache
from ember.models.constrain.regex_nfa import AutomatonWorkExceeded, compile_regex
from ember.models.constrain.schema import compile_schema
from tests.models.constrain.fixtures import automaton_accepts


def _wide(k: int) -> str:
    return "(?:" + "|".join(chr(0x100 + i) for i in range(k)) + ")*"


def test_equal_closures_are_one_object() -> None:
    built = compile_regex(_wide(300), search=True, length=(0, 50))
    targets = [t for row in built.edges for _, t in row]
    assert len({id(t) for t in targets}) == len(set(targets))


@pytest.mark.parametrize("pattern, length", [("^(?:a?b?){500}$", (0, None)), (_wide(300), (0, 50))])
def test_a_build_stops_once_past_its_budget(pattern: str, length: tuple[int, int | None]) -> None:
    unbounded = compile_regex(pattern, search=True, length=length)
    budget = 20_000
    assert unbounded.work > 2 * budget
    with pytest.raises(AutomatonWorkExceeded) as caught:
        compile_regex(pattern, search=True, length=length, budget=budget)
    # Checked every few thousand units: stopped right past the budget, not at the end; a
    # length product is refused whole before any of it is made (counted as it would be).
    assert budget < caught.value.work < unbounded.work
    if length == (0, None):
        assert caught.value.work < budget + 10_000


def test_quadratic_closures_are_charged_though_their_states_are_few() -> None:
    # ~5,000 states each (15,000 in all: far inside the old 200,000-state budget), but each
    # state's closure holds every later one: ~0.3 CPU-s a pattern.
    properties = {f"p{i}": {"type": "string", "pattern": f"^(?:a?b?){{500}}{i}$"} for i in range(4)}
    schema = {"type": "object", "properties": properties}
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        compile_schema(schema, path="/s", strict=True, automata=Automata(cache=AutomatonCache()))
    assert caught.value.field.startswith("/s/properties/p") and caught.value.field.endswith(
        "/pattern"
    )
    assert f"{MAX_AUTOMATON_WORK:,} units of automaton work" in str(caught.value)


@pytest.mark.parametrize("worker", [False, True])
def test_a_refused_pattern_is_built_no_further_than_the_request_has_left(worker: bool) -> None:
    cache = AutomatonCache()
    if worker:
        cache.attach_worker()
    try:
        budget = Automata(cache=cache)
        budget.charge(MAX_AUTOMATON_WORK - 20_000, "/earlier")
        with pytest.raises(AutomatonBudgetExceeded) as caught:
            budget.regex(_wide(300), "/s/pattern", search=True, length=(0, 50))
        assert caught.value.field == "/s/pattern"
        assert "this one needs more than the 20,000 left" in str(caught.value)
        assert cache.held == 0  # not built to the end, so not kept
        if worker:
            assert cache.worker is not None
            with pytest.raises(AutomatonWorkExceeded) as stopped:
                cache.worker.compile(
                    _wide(300), "/s/pattern", search=True, length=(0, 50), budget=20_000
                )
            # The worker stopped there (refusing the length product before making it).
            full = compile_regex(_wide(300), search=True, length=(0, 50)).work
            assert 20_000 < stopped.value.work < full
    finally:
        if worker:
            cache.detach_worker()


def test_the_cache_bounds_what_its_automata_hold_not_their_states() -> None:
    # Optional items in a row: ~5,000 states, but closures of up to 1,000 states each (~20 MB
    # built here); three such fit a bound of 600,000 states, two fit one of that much work.
    keys = [(f"^(?:a?b?){{500}}{i}$", True, (0, None)) for i in range(3)]
    cache = AutomatonCache(capacity=MAX_AUTOMATON_WORK)
    built = [cache.automaton(key, f"/p{i}") for i, key in enumerate(keys)]
    assert sum(len(a.edges) for a in built) < 20_000
    assert cache.held == built[1].work + built[2].work <= cache.capacity
    assert cache.automaton(keys[0], "/p0") is not built[0]  # dropped, built again


@pytest.mark.parametrize(
    "pattern, length",
    [
        ("(?:a|b|ab|ba)*c", (0, None)),
        ("(?:a|b|ab|ba)*c", (2, 6)),
        ("^(?:a?b?){6}$", (0, None)),
        ("^(?:(?:a?){3}b)*$", (1, 7)),
        ("^(?:x|(?:a?b?)+)*y$", (0, 9)),
    ],
)
def test_shared_closures_match_what_reautomaton_accepts(
    pattern: str, length: tuple[int, int | None]
) -> None:
    # The closures a state shares along single moves (and interned by value) are a fast path:
    # Python's re is the reference, on random texts near the pattern.
    built = compile_regex(pattern, search=True, length=length)
    judge = re.compile(pattern)
    low, high = length
    rng = random.Random(pattern)
    for _ in range(600):
        text = "".join(rng.choice("abcxy") for _ in range(rng.randint(0, 10)))
        fits = low <= len(text) and (high is None or len(text) <= high)
        assert automaton_accepts(built, text) == (fits and judge.search(text) is not None), text
