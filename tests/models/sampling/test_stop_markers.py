"""StopChecker against what vLLM's detokenizer does: stop strings are matched in the text the
user gets (the output parser's marker tokens are passed through, never searched), and
``include_stop_str`` keeps the stop string or the stop token's text."""

from __future__ import annotations

from collections.abc import Sequence

from ember.models.sampling import SamplingParams, StopChecker

PIECES = ["a", "b", "think", "</think>", "hi", "[EOS]", " x"]
SPECIAL = {3, 5}
END, EOS = 3, 5
MARKERS = {END: "</think>"}


def skip_special(ids: Sequence[int]) -> str:
    return "".join(PIECES[i] for i in ids if i not in SPECIAL)


def keep_special(ids: Sequence[int]) -> str:
    return "".join(PIECES[i] for i in ids)


def ids_of(*pieces: str) -> list[int]:
    return [PIECES.index(p) for p in pieces]


def run(checker: StopChecker, ids: Sequence[int]) -> tuple[str, object, object]:
    text = []
    for token in ids:
        delta = checker.push(token)
        text.append(delta.text)
        if delta.finished:
            return "".join(text), delta.finish_reason, delta.stop_reason
    tail = checker.finish()
    return "".join(text) + tail.text, None, None


def test_a_stop_string_never_matches_inside_a_marker() -> None:
    for stop in ("think", "</", ">"):
        checker = StopChecker(SamplingParams(stop=(stop,)), skip_special, markers=MARKERS)
        assert run(checker, ids_of("</think>", "hi", "a")) == ("</think>hia", None, None)


def test_a_stop_string_still_matches_the_text_around_a_marker() -> None:
    checker = StopChecker(SamplingParams(stop=("think",)), skip_special, markers=MARKERS)
    assert run(checker, ids_of("a", "</think>", "think", "b")) == ("a</think>", "stop", "think")
    # As vLLM with skip_special_tokens: the marker is no text, so "ab" spans it; the marker
    # came inside the stop string and goes with it.
    checker = StopChecker(SamplingParams(stop=("ab",)), skip_special, markers=MARKERS)
    assert run(checker, ids_of("hi", "a", "</think>", "b")) == ("hi", "stop", "ab")


def test_a_marker_waits_behind_held_back_text() -> None:
    checker = StopChecker(SamplingParams(stop=("ab",)), skip_special, markers=MARKERS)
    assert checker.push(ids_of("a")[0]).text == ""  # "a" could begin "ab"
    assert checker.push(END).text == ""  # so the marker after it waits
    assert checker.push(ids_of("hi")[0]).text == "a</think>hi"


def test_include_stop_str_keeps_the_stop_string() -> None:
    checker = StopChecker(SamplingParams(stop=("ab",)), skip_special, include_stop_str=True)
    assert run(checker, ids_of("hi", "a", "b", "a")) == ("hiab", "stop", "ab")


def test_include_stop_str_keeps_a_stop_tokens_text() -> None:
    params = SamplingParams(stop_token_ids=(6,))
    checker = StopChecker(params, skip_special, include_stop_str=True)
    assert run(checker, ids_of("a", " x", "b")) == ("a x", "stop", 6)
    checker = StopChecker(params, skip_special)
    assert run(checker, ids_of("a", " x", "b")) == ("a", "stop", 6)


def test_include_stop_str_keeps_eos_text_only_when_special_tokens_are_shown() -> None:
    shown = StopChecker(SamplingParams(), keep_special, (EOS,), include_stop_str=True)
    assert run(shown, ids_of("a", "[EOS]")) == ("a[EOS]", "stop", EOS)
    skipped = StopChecker(SamplingParams(), skip_special, (EOS,), include_stop_str=True)
    assert run(skipped, ids_of("a", "[EOS]")) == ("a", "stop", EOS)
