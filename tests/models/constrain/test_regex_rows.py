"""A wide state's edges that an interval meets, by bisection (regex_rows.py), against the slow
reference: every edge of the row tested."""

from __future__ import annotations

import random
import secrets

from ember.models.api.guided_fields import choice_regex
from ember.models.constrain.charset import ALL, NONE, SOME, CharSet
from ember.models.constrain.regex_nfa import compile_regex
from ember.models.constrain.regex_rows import WIDE_ROW, row_index


def _meeting_reference(row, low: int, high: int) -> list:  # type: ignore[no-untyped-def]
    return [edge for edge in row if edge[0].relation(low, high) != NONE]


def _resolve_reference(automaton, states, low: int, high: int):  # type: ignore[no-untyped-def]
    """``RegexAutomaton.resolve`` testing every edge of every state."""
    out: set[int] = set()
    for state in states:
        for chars, target in automaton.edges[state]:
            kind = chars.relation(low, high)
            if kind == SOME:
                return None
            if kind == ALL:
                out |= target
    return frozenset(out)


def _random_row(rng: random.Random, size: int) -> list:  # type: ignore[no-untyped-def]
    """Edges whose classes are disjoint: runs of code points cut at random, some edges holding
    several of the runs."""
    cuts = sorted(rng.sample(range(0, 3_000), 2 * size * 2))
    runs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    rng.shuffle(runs)
    row = []
    for k in range(size):
        mine = runs[2 * k : 2 * k + rng.choice((1, 2))]
        row.append((CharSet(mine), frozenset({k})))
    return row


def test_the_index_finds_what_testing_every_edge_finds() -> None:
    rng = random.Random(secrets.randbits(32))
    for _ in range(40):
        row = _random_row(rng, rng.randrange(WIDE_ROW + 1, 200))
        index = row_index(row)
        assert index is not None
        for _ in range(200):
            low = rng.randrange(0, 3_100)
            high = low + rng.choice((0, 0, 1, 5, 50, 500))
            assert index.meeting(row, low, high) == _meeting_reference(row, low, high)


def test_rows_that_are_short_or_overlap_are_walked_whole() -> None:
    narrow = [(CharSet.of(i), frozenset({i})) for i in range(WIDE_ROW)]
    assert row_index(narrow) is None
    overlapping = [(CharSet([(i, i + 1)]), frozenset({i})) for i in range(WIDE_ROW + 5)]
    assert row_index(overlapping) is None


def test_a_trie_with_a_wide_root_steps_as_its_general_construction() -> None:
    # review45: 50,000 two-character choices were 50,000 root edges, each tested at every
    # step from the root (~49 ms a step). The trie's root is indexed; the general
    # construction's start (its alternatives apart) is the reference.
    rng = random.Random(secrets.randbits(32))
    words = sorted({chr(0x4E00 + rng.randrange(400)) + rng.choice("xyz") for _ in range(300)})
    trie = compile_regex(choice_regex(words, "/choice"))
    general = compile_regex("(?:" + "|".join(words) + "){1}")
    assert max(len(trie.edges[s]) for s in trie.start) > WIDE_ROW
    for _ in range(2_000):
        first = 0x4E00 + rng.randrange(-20, 420)
        text = chr(first) + rng.choice("xyzw")
        got, expected = trie.start, general.start
        for char in text:
            got, expected = trie.step(got, ord(char)), general.step(expected, ord(char))
            assert bool(got) == bool(expected)
        assert trie.accepts(got) == general.accepts(expected) == (text in words)
        low = 0x4E00 + rng.randrange(-20, 420)
        span = (low, low + rng.choice((0, 3, 40)))
        assert trie.allows_any(trie.start, *span) == general.allows_any(general.start, *span)
        assert trie.resolve(trie.start, *span) == _resolve_reference(trie, trie.start, *span)
