"""A regex build's work counts every part of what it costs (review41): reading the pattern (a
1,000,000-character literal took 6.4 CPU-s to parse before its build was refused), the ranges of
its character classes (a class of 20,000 code points was 7 units, 74 ms and ~2 MB held), and
the epsilon chains its closures walk (empty groups in a row: 64,000 units, 17.6 CPU-s). The
CPU per unit is measured by bench/regex_work.py; here, only units."""

from __future__ import annotations

import pytest

from ember.models.constrain.automata import MAX_AUTOMATON_WORK, Automata, AutomatonBudgetExceeded
from ember.models.constrain.automaton_cache import AutomatonCache
from ember.models.constrain.regex_nfa import AutomatonWorkExceeded, compile_regex
from ember.models.constrain.regex_syntax import RegexError, parse_regex
from ember.models.constrain.regex_work import (
    UNITS_PER_BAR,
    UNITS_PER_RANGE,
    WorkCounter,
    pattern_units,
)


def _singles(count: int, shift: int = 0) -> str:
    """A class of ``count`` code points, none adjacent: as many ranges as code points."""
    return "[" + "".join(chr(0x100 + 2 * i + shift) for i in range(count)) + "]"


FAMILIES = {
    "empty groups": "^" + "()" * 4000 + "a$",
    "empty non-capturing groups": "^" + "(?:)" * 3000 + "a$",
    "a literal": "^" + "a" * 8000 + "$",
    "astral literal": "^" + "\U0001d538" * 8000 + "$",
    "class escapes in a class": "^[" + "\\W" * 4000 + "]$",
    "a class of singles": "^" + _singles(8000) + "$",
    "a negated class of singles": "^[^" + _singles(8000)[1:] + "$",
    "literal braces": "^" + "a{" * 4000 + "}$",
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_is_charged_for_its_pattern_and_its_states(name: str) -> None:
    # Its text, then a unit a state made and an edge kept (closure visits on top).
    pattern = FAMILIES[name]
    built = compile_regex(pattern, search=True)
    kept = sum(len(row) for row in built.edges)
    assert built.work >= pattern_units(pattern) + len(built.edges) + kept


@pytest.mark.parametrize("negated", [False, True])
def test_a_class_is_charged_by_its_ranges(negated: bool) -> None:
    # Each code point is a range of its own (none are adjacent): ~100 bytes held apiece.
    body = _singles(20_000)
    pattern = "^" + (body.replace("[", "[^", 1) if negated else body) + "$"
    built = compile_regex(pattern, search=True)
    (ranges,) = {len(chars.ranges) for row in built.edges for chars, _ in row}
    assert ranges >= 20_000
    assert built.work >= pattern_units(pattern) + ranges * UNITS_PER_RANGE


def test_empty_groups_in_a_row_are_charged_in_proportion() -> None:
    # The chain of epsilon moves is walked once, each state it passes charged: twice the groups
    # is twice the work, not four times (nor the same).
    one, two = (compile_regex("^" + "()" * n + "a$", search=True).work for n in (4000, 8000))
    assert 1.9 < two / one < 2.1


def test_a_pattern_too_long_for_the_budget_is_refused_unread() -> None:
    # Its syntax error, at the very end, is never reached: the refusal comes before the parse.
    pattern = "a" * 1_000_000 + ")"
    with pytest.raises(AutomatonWorkExceeded) as caught:
        compile_regex(pattern, budget=MAX_AUTOMATON_WORK)
    assert caught.value.work == pattern_units(pattern)
    with pytest.raises(RegexError, match="unbalanced"):
        compile_regex("a" * 1_000 + ")", budget=MAX_AUTOMATON_WORK)


@pytest.mark.parametrize("worker", [False, True])
def test_a_pattern_too_long_for_what_is_left_is_refused_before_it_is_built(worker: bool) -> None:
    # 6,000,000 astral characters: 72 MB as the worker's job (12 bytes a character in JSON),
    # past its frame bound, which killed it and answered a 503 "retry" (review41).
    cache = AutomatonCache()
    if worker:
        cache.attach_worker()
    try:
        budget = Automata(cache=cache)
        with pytest.raises(AutomatonBudgetExceeded) as caught:
            budget.regex("\U0001d538" * 6_000_000, "/s/pattern", search=True)
        assert caught.value.field == "/s/pattern"
        assert f"needs more than the {MAX_AUTOMATON_WORK:,} left" in str(caught.value)
        assert cache.held == 0
        if worker:
            assert cache.worker is not None and cache.worker.starts == 0
    finally:
        if worker:
            cache.detach_worker()


def test_the_cache_holds_classes_by_their_ranges() -> None:
    # Five classes of 20,000 code points (~2 MB each, ~40,000 units): a cache of 100,000
    # units keeps two, where at 7 units apiece it kept them all (review41: 200 of them held
    # 441 MiB).
    cache = AutomatonCache(capacity=100_000)
    built = [
        cache.automaton(("^" + _singles(20_000, i % 2) + f"{i}$", True, (0, None)), f"/p{i}")
        for i in range(5)
    ]
    assert all(automaton.work >= 20_000 for automaton in built)
    assert cache.held == sum(automaton.work for automaton in built[-2:]) <= cache.capacity


def test_each_bar_of_a_pattern_is_charged_apart_from_its_characters() -> None:
    # review44: "|" * 590,000 was 590,000 units and 2.5 CPU-s (an alternative costs a parse
    # node, an anchor scan and a branch): refused as the parse passes the budget now.
    with pytest.raises(AutomatonWorkExceeded):
        compile_regex("|" * 300_001, budget=MAX_AUTOMATON_WORK)
    # As the parse opens each alternative: an escaped "|" is one literal character (review45).
    bar, class_range = UNITS_PER_BAR, UNITS_PER_RANGE
    cases = [("a|b|c", 2 * bar), ("a\\|b\\|c", 0), ("(a|b)|[|]", 2 * bar + class_range)]
    for pattern, units in cases:  # the last: two alternatives and a class of one range
        counter = WorkCounter(None)
        parse_regex(pattern, counter)
        assert counter.done == units, pattern
