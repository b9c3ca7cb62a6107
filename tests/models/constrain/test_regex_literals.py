"""A pattern that is an alternation of literals (a choice list's regex) is built as the trie of
its strings (regex_literals.py): the fast path, compared here with the Thompson construction it
replaces (the same pattern under ``{1}``, which the fast path does not take) on random lists."""

from __future__ import annotations

import random

import pytest

from ember.models.api.guided_fields import choice_regex
from ember.models.constrain.regex_nfa import RegexAutomaton, compile_regex
from ember.models.constrain.regex_work import AutomatonWorkExceeded

ALPHABET = "ab.|*(\\é😀"


def _walk(automaton: RegexAutomaton, text: str) -> list[tuple[bool, bool]]:
    """(alive, accepts) after each prefix of ``text``, the empty one first."""
    states = automaton.start
    out = [(bool(states), automaton.accepts(states))]
    for c in text:
        states = automaton.step(states, ord(c)) if states else states
        out.append((bool(states), automaton.accepts(states)))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_trie_accepts_what_the_thompson_automaton_accepts(seed: int) -> None:
    rng = random.Random(seed)
    words = [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6)))
        for _ in range(rng.randint(1, 30))
    ]
    pattern = choice_regex(words, "/guided_choice")
    fast = compile_regex(pattern)
    slow = compile_regex(f"(?:{pattern}){{1}}")
    assert fast.work < slow.work  # the fast path was taken
    probes = words + [w + rng.choice(ALPHABET) for w in words] + [w[:-1] for w in words]
    probes += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7))) for _ in range(50)]
    for text in probes:
        assert _walk(fast, text) == _walk(slow, text), text


@pytest.mark.parametrize(
    ("pattern", "reference"),
    [
        ("yes|no|maybe", "(?:yes|no|maybe){1}"),
        ("(?:a(?:b|c)|d)", "(?:a(?:b|c)|d){1}"),
        ("^(?:ab|a)$", "^(?:ab|a){1}$"),
        ("", "(?:){1}"),
        ("a|", "(?:a|){1}"),
        ("[ab]x|ay|\\d\\d", "(?:[ab]x|ay|\\d\\d){1}"),
        ("\\.|\\n", "(?:\\.|\\n){1}"),
    ],
)
def test_literal_alternations_of_every_shape_match_the_reference(
    pattern: str, reference: str
) -> None:
    fast = compile_regex(pattern)
    slow = compile_regex(reference)
    for text in ("", "yes", "no", "ma", "maybe", "ab", "a", "ac", "d", "bx", "ay", "12", ".", "\n"):
        assert _walk(fast, text) == _walk(slow, text), (pattern, text)


def test_the_trie_work_is_linear_in_the_characters() -> None:
    rng = random.Random(7)
    words = ["".join(rng.choice("abcdefgh") for _ in range(30)) for _ in range(5_000)]
    pattern = choice_regex(words, "/guided_choice")
    built = compile_regex(pattern)
    # The pattern's characters, a unit an alternative, then one a trie node (and its edge).
    bars = len(words) - 1
    assert built.work <= len(pattern) + bars + 5_000 * 30 + 1
    with pytest.raises(AutomatonWorkExceeded):  # read and parsed, refused in the trie
        compile_regex(pattern, budget=len(pattern) + bars + 1_000)


def test_choices_that_end_at_one_node_are_one_edge_to_the_end() -> None:
    # review44: 50,000 one-character choices were 50,000 edges at the root, each tested at
    # every step from it (28 ms a step, minutes of a first mask over a real vocabulary).
    letters = [chr(0x4E00 + i) for i in range(20_000)]
    automaton = compile_regex(choice_regex(letters + ["ab", "abc"], "/choice"))
    assert sum(len(automaton.edges[s]) for s in automaton.start) <= 2  # the leaves, and "a"
    for text, expected in [(letters[7], True), ("ab", True), ("abc", True), ("a", False)]:
        states = automaton.start
        for char in text:
            states = automaton.step(states, ord(char))
        assert automaton.accepts(states) is expected, text
