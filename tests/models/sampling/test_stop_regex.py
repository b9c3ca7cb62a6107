"""Stop regexes run as ember's own automata (linear in the text, each character stepped once),
checked against Python's ``re.search`` (what SGLang runs) as a slow reference."""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Sequence

import pytest

from ember.errors import InvalidModelInput
from ember.models.api.errors import InvalidRequestField
from ember.models.api.generate_params import stop_regexes
from ember.models.constrain.automata import Automata
from ember.models.constrain.automaton_cache import AutomatonCache
from ember.models.constrain.stop_regex import (
    MAX_STOP_REGEX_STATES,
    MAX_STOP_REGEX_TARGETS,
    STOP_REGEX_WORK,
    StopRegexBuild,
    StopRegexesTooLarge,
    StopScan,
    compile_stop_regex,
    step_reference,
)
from ember.models.sampling import SamplingParams, StopChecker


def _checker(text_pieces: Sequence[str], patterns: Sequence[str], **params: object) -> StopChecker:
    def decode(ids: Sequence[int]) -> str:
        return "".join(text_pieces[i] for i in ids)

    return StopChecker(SamplingParams(stop_regex=tuple(patterns), **params), decode)  # type: ignore[arg-type]


QUANTIFIERS = ("", "", "*", "+", "?", "{1,2}", "{2}")


def _piece(rng: random.Random, depth: int, quantify: bool) -> str:
    """An atom and maybe a quantifier. A quantified group has none inside (star height 1):
    nested quantifiers make Python's re, the reference, exponential even on short texts."""
    if depth < 2 and rng.random() < 0.3:
        inner = quantify and rng.random() < 0.5
        group = "(" + _alternation(rng, depth + 1, inner) + ")"
        return group if inner or not quantify else group + rng.choice(QUANTIFIERS)
    atom = rng.choice(["a", "b", "[ab]", ".", "[^a]"])
    return atom + rng.choice(QUANTIFIERS) if quantify else atom


def _alternation(rng: random.Random, depth: int, quantify: bool = True) -> str:
    branches = []
    for _ in range(rng.choice((1, 1, 2))):
        pieces = [_piece(rng, depth, quantify) for _ in range(rng.randint(1, 3))]
        branches.append("".join(pieces))
    return "|".join(branches)


def _pattern(rng: random.Random) -> str:
    body = _alternation(rng, 0)
    start = "^" if rng.random() < 0.2 else ""
    end = "$" if rng.random() < 0.3 else ""
    return f"{start}(?:{body}){end}" if start or end else body


def test_the_stop_decision_is_re_searchs_token_by_token() -> None:
    seed = secrets.randbits(32)
    rng = random.Random(seed)
    compared = 0
    for _ in range(300):
        patterns = [_pattern(rng) for _ in range(rng.randint(1, 3))]
        text = "".join(rng.choice("abc") for _ in range(rng.randint(1, 20)))
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, len(text) - 1)))
        pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        checker = _checker(pieces, patterns)
        expected: tuple[int, str] | None = None
        for n in range(1, len(pieces) + 1):
            seen = "".join(pieces[:n])
            found = next((p for p in patterns if re.search(p, seen)), None)
            if found is not None:
                expected = (n, found)
                break
        got: tuple[int, str] | None = None
        for n, token in enumerate(range(len(pieces)), 1):
            delta = checker.push(token)
            if delta.finished:
                got = (n, delta.stop_reason)  # type: ignore[assignment]
                break
        assert got == expected, (seed, patterns, pieces)
        compared += 1
    assert compared == 300


@pytest.mark.parametrize("pattern", ["(a+)+b", "(x+x+)+y", "^(a|aa)+$"])
def test_a_backtracking_pattern_steps_each_character_once(pattern: str) -> None:
    # Python's re takes 2**n steps for these on n a's (x's) with no match at the end: the
    # engine's step thread would stall for every tenant. The automaton steps each new character
    # once per pattern, and never searches text it has seen again.
    letter = "x" if "x" in pattern else "a"
    tokens = 4000
    # "!" first: ^(a|aa)+$ can then never match, and the others need a letter never sampled.
    pieces = ["!"] + [letter] * tokens
    checker = _checker(pieces, [pattern], max_tokens=tokens)
    for token in range(tokens - 1):
        assert not checker.push(token).finished
    last = checker.push(1)
    assert (last.finished, last.finish_reason) == (True, "length")
    assert checker.regex_steps <= tokens


def test_a_matching_pattern_stops_at_once_without_searching_again() -> None:
    checker = _checker(["a"] * 10, ["(a+)+$"])
    delta = checker.push(0)
    assert (delta.finished, delta.stop_reason, checker.regex_steps) == (True, "(a+)+$", 1)


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [("(?=a)b", "lookahead"), (r"(a)\1", "backreference"), (r"\bword", "word boundar")],
)
def test_a_pattern_outside_embers_dialect_names_it(pattern: str, construct: str) -> None:
    with pytest.raises(InvalidModelInput) as error:
        SamplingParams(stop_regex=("ok", pattern))
    message = str(error.value)
    assert "stop_regex" in message and construct in message.lower(), message
    assert "no backreferences, lookaround" in message, message


def test_stop_regexes_are_bounded_by_their_states_in_all() -> None:
    # review40: 16 wide patterns within the schema budget (192,448 states) cost 142 ms of the
    # event loop a token: each character steps every state of the set.
    wide = [f"[a-h].{{250}}{i}" for i in range(2)]  # ~520 states each
    with pytest.raises(InvalidRequestField) as refused:
        stop_regexes({"stop_regex": wide}, "sampling_params", 16, Automata())
    assert refused.value.field.endswith("stop_regex")  # the list, not one of its patterns
    assert f"at most {MAX_STOP_REGEX_STATES} states and" in str(refused.value)
    assert "states by pattern" in str(refused.value)
    with pytest.raises(InvalidModelInput, match="at most 512 states and"):
        SamplingParams(stop_regex=tuple(wide))
    # What stop patterns look like fits many times over.
    usual = [r"\n\n+", "Observation:|Final Answer:", r"</?tool_call>", r"\d+\."]
    assert len(stop_regexes({"stop_regex": usual}, "sampling_params", 16, Automata())) == 4


def test_stop_regexes_are_refused_as_their_build_passes_their_own_cap() -> None:
    """review42: 16 x ``([a-z]?){1000}\\0`` were each built within the request's schema budget
    (~1 s of CPU) before the state count refused them, with the schemas' message. The build
    stops within the stop regexes' own work cap, at the first pattern, and says so."""
    wide = ["([a-z]?){1000}\x00"] * 16
    request = Automata()
    with pytest.raises(InvalidRequestField) as refused:
        stop_regexes({"stop_regex": wide}, "sampling_params", 16, request)
    message = str(refused.value)
    assert refused.value.field.endswith("stop_regex"), message
    assert "units of work by pattern 0" in message and "schemas whose" not in message, message
    assert request.states == 0  # nothing charged to the request for a refused list
    build = StopRegexBuild(AutomatonCache())
    with pytest.raises(StopRegexesTooLarge, match=f"more than {STOP_REGEX_WORK:,} units"):
        build.add(wide[0], "stop_regex")
    with pytest.raises(InvalidModelInput, match="units of work by pattern 0"):
        SamplingParams(stop_regex=tuple(wide))


def test_stop_regexes_are_bounded_by_the_targets_a_step_unions() -> None:
    """review42: ``(a?){124}\\0`` is within 512 states, but each of them leads to ~60 others:
    ~100 µs a character of output, each step a union of 7,880 states."""
    with pytest.raises(InvalidRequestField) as refused:
        stop_regexes({"stop_regex": "(a?){124}\x00"}, "sampling_params", 16, Automata())
    assert f"{MAX_STOP_REGEX_TARGETS:,} edge targets in all" in str(refused.value)
    assert "edge targets by pattern 0" in str(refused.value)
    with pytest.raises(InvalidModelInput, match="edge targets by pattern 0"):
        SamplingParams(stop_regex="(a?){124}\x00")
    # 8 stop words of 22 letters each: hundreds of states, a few targets each.
    words = [f"word{i:02d}" + "x" * 16 for i in range(8)]
    assert len(stop_regexes({"stop_regex": words}, "sampling_params", 16, Automata())) == 8


def test_a_scan_steps_as_the_reference_does() -> None:
    """``StopScan.feed`` (targets kept by character and state) against ``step_reference``
    (each edge's class tested), fresh random patterns and texts fed in random pieces, some
    scans past what they may keep (then found as the reference finds them)."""
    rng = random.Random(secrets.randbits(32))
    alphabet = "ab\n:xyzé" + "".join(chr(0x4E00 + i) for i in range(200))
    for round_ in range(60):
        pattern = _pattern(rng)
        regex = compile_stop_regex(pattern)
        scan = StopScan(regex)
        if round_ % 3 == 0:
            scan._kept = scan._most - rng.randrange(0, 20)  # full within a few steps
        states = regex.automaton.start
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 300)))
        at = 0
        while at < len(text):
            piece = text[at : at + rng.randrange(1, 6)]
            at += len(piece)
            matched, _ = scan.feed(piece)
            states = step_reference(regex.automaton, states, piece)
            assert matched == regex.automaton.accepts(states), (pattern, text[:at])
            assert scan._states == states, (pattern, text[:at])  # the same set, not just verdict


def test_stop_regexes_are_charged_to_the_requests_budget() -> None:
    request = Automata()
    (regex,) = stop_regexes({"stop_regex": "Observation:"}, "sampling_params", 16, request)
    assert request.states == regex.automaton.work > 0


def test_a_scan_leaves_the_shared_automatons_memo_alone() -> None:
    # The automaton is the process's (automaton_cache.py): a memo of a request's state sets,
    # kept on it, held ~3 GB after review40's request ended.
    regex = compile_stop_regex("[a-h].{200}z")
    scan = StopScan(regex)
    scan.feed("".join(random.Random(5).choice("abcdefgh") for _ in range(2000)))
    assert regex.automaton._memo == {}
