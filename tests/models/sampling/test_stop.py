"""StopChecker: stop ids, EOS, max_tokens, stop strings across tokens, no partial stop shown."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.models.sampling import SamplingParams, StopChecker
from ember.models.sampling.stop import IncrementalDecoder

# A toy vocabulary: token id -> text. Multi-character pieces make stop strings span tokens.
PIECES = ["a", "b", "c", "ab", "bc", "STOP", "ST", "OP", "\n", " ", "x", "</s>"]
EOS = 11


def decode(ids: Sequence[int]) -> str:
    return "".join(PIECES[i] for i in ids if i != EOS)


def ids_of(*pieces: str) -> list[int]:
    return [PIECES.index(p) for p in pieces]


def run(checker: StopChecker, ids: Sequence[int]) -> tuple[list[str], str | None, object]:
    deltas: list[str] = []
    for token in ids:
        delta = checker.push(token)
        deltas.append(delta.text)
        if delta.finished:
            return deltas, delta.finish_reason, delta.stop_reason
    return deltas, None, None


def test_stop_string_split_across_tokens_is_never_shown() -> None:
    checker = StopChecker(SamplingParams(stop=("STOP",)), decode)
    deltas, reason, matched = run(checker, ids_of("a", "ST", "OP", "b"))
    assert deltas == ["a", "", ""]  # "ST" is held back, then the match cuts it
    assert (reason, matched) == ("stop", "STOP")
    assert checker.text == "a"


def test_held_text_is_released_when_it_cannot_match() -> None:
    checker = StopChecker(SamplingParams(stop=("STOP",)), decode)
    deltas, reason, _ = run(checker, ids_of("ST", "a", "b"))
    assert deltas == ["", "STa", "b"] and reason is None


def test_earliest_completed_stop_wins_and_text_ends_before_it() -> None:
    checker = StopChecker(SamplingParams(stop=("bc", "abc")), decode)
    deltas, reason, matched = run(checker, ids_of("x", "ab", "c"))
    # After "xabc" both appear; "abc" starts first, whatever the order of the list.
    assert "".join(deltas) == "x" and (reason, matched) == ("stop", "abc")
    checker = StopChecker(SamplingParams(stop=("abcd", "bc")), decode)
    deltas, _, matched = run(checker, ids_of("a", "bc"))
    # "bc" completes before "abcd" could: generation stops at the first token with a match.
    assert "".join(deltas) == "a" and matched == "bc"


def test_stop_token_ids_and_eos() -> None:
    params = SamplingParams(stop_token_ids=(PIECES.index("\n"),))
    checker = StopChecker(params, decode, eos_token_ids=(EOS,))
    deltas, reason, matched = run(checker, ids_of("a", "\n", "b"))
    assert deltas == ["a", ""] and (reason, matched) == ("stop", PIECES.index("\n"))
    checker = StopChecker(SamplingParams(), decode, eos_token_ids=(EOS,))
    assert run(checker, [*ids_of("a"), EOS]) == (["a", ""], "stop", EOS)
    ignoring = StopChecker(SamplingParams(ignore_eos=True, max_tokens=3), decode, (EOS,))
    assert run(ignoring, [*ids_of("a"), EOS, *ids_of("b")]) == (["a", "", "b"], "length", None)


def test_stop_token_releases_held_text() -> None:
    checker = StopChecker(SamplingParams(stop=("STOP",)), decode, eos_token_ids=(EOS,))
    deltas, reason, _ = run(checker, [*ids_of("a", "ST"), EOS])
    assert deltas == ["a", "", "ST"] and reason == "stop"


def test_max_tokens_is_length_and_shows_the_last_token() -> None:
    checker = StopChecker(SamplingParams(max_tokens=2, stop=("STOP",)), decode)
    assert run(checker, ids_of("a", "ST", "b")) == (["a", "ST"], "length", None)
    checker = StopChecker(SamplingParams(max_tokens=2, stop=("STOP",)), decode)
    assert run(checker, ids_of("ST", "OP")) == (["", ""], "stop", "STOP")


def test_min_tokens_suspends_every_stop_condition() -> None:
    params = SamplingParams(min_tokens=3, stop=("STOP",), stop_token_ids=(PIECES.index("x"),))
    checker = StopChecker(params, decode, eos_token_ids=(EOS,))
    # STOP before the 3rd token is shown; the stop id (x) and EOS count from the 3rd token on.
    deltas, reason, matched = run(checker, ids_of("STOP", "x", "ST", "OP"))
    assert deltas == ["STOP", "x", "", ""] and (reason, matched) == ("stop", "STOP")
    checker = StopChecker(params, decode, eos_token_ids=(EOS,))
    assert run(checker, [*ids_of("a", "b"), EOS]) == (["a", "b", ""], "stop", EOS)


def test_push_after_finish_is_a_bug() -> None:
    checker = StopChecker(SamplingParams(max_tokens=1), decode)
    checker.push(0)
    with pytest.raises(RuntimeError):
        checker.push(0)


def test_finish_for_an_outside_reason_releases_everything() -> None:
    checker = StopChecker(SamplingParams(stop=("STOP",)), decode)
    checker.push(PIECES.index("ST"))
    delta = checker.finish()
    assert delta.text == "ST" and delta.finished and delta.finish_reason is None


def reference_output(ids: Sequence[int], stops: Sequence[str], max_tokens: int | None) -> str:
    """Decode growing prefixes; stop at the first prefix containing a stop string."""
    for n in range(1, len(ids) + 1):
        text = decode(ids[:n])
        hits = [text.find(s) for s in stops if s in text]
        if hits:
            return text[: min(hits)]
        if max_tokens is not None and n >= max_tokens:
            return text
    return decode(ids)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(st.integers(0, len(PIECES) - 2), max_size=30),
    stops=st.lists(st.sampled_from(["STOP", "ab", "bca", "\n\n", " x", "cc", "aab"]), max_size=4),
    max_tokens=st.one_of(st.none(), st.integers(1, 30)),
)
def test_streamed_text_equals_the_reference_and_never_shows_a_stop_prefix(
    ids: list[int], stops: list[str], max_tokens: int | None
) -> None:
    checker = StopChecker(SamplingParams(stop=tuple(stops), max_tokens=max_tokens), decode)
    shown = ""
    stopped_by_string = False
    for token in ids:
        delta = checker.push(token)
        shown += delta.text
        assert not any(s in shown for s in stops)
        if delta.finished:
            stopped_by_string = isinstance(delta.stop_reason, str)
            break
    else:
        shown += checker.finish().text
    assert shown == reference_output(ids, stops, max_tokens)
    if stopped_by_string:
        # Nothing of the stop string was ever streamed: the shown text is exactly the cut text.
        assert shown == checker.text


def _byte_level_tokenizer():
    """A real byte-level BPE (as GLM/Kimi use) trained here, so multi-byte characters split."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(["hello world, the end. " * 20, "naïve café"], trainer)
    return tok


def test_multibyte_characters_are_never_emitted_half_done() -> None:
    tok = _byte_level_tokenizer()
    text = "héllo 😀 wörld END tail"
    ids = tok.encode(text).ids
    assert len(ids) > len(text.split())  # the emoji and accents are split into byte tokens
    checker = StopChecker(SamplingParams(stop=("END",)), tok.decode)
    pieces = []
    for token in ids:
        delta = checker.push(token)
        assert "\ufffd" not in delta.text
        pieces.append(delta.text)
        if delta.finished:
            break
    assert "".join(pieces) == "héllo 😀 wörld "


def test_incremental_decoder_matches_full_decode() -> None:
    tok = _byte_level_tokenizer()
    text = "the end 😀😀 naïve café, hello"
    ids = tok.encode(text).ids
    decoder = IncrementalDecoder(tok.decode)
    streamed = "".join(decoder.push(t) for t in ids) + decoder.flush()
    assert streamed == tok.decode(ids) == text


def test_stop_regex_keeps_its_match_but_sglangs_trim_of_the_patterns_own_text() -> None:
    # SGLang leaves a regex's match in the output, except where its trim, which looks the
    # pattern up as a stop string, finds the pattern's own text ("bc" for the pattern bc).
    ids = ids_of("x", "a", "b", "c", "x")
    deltas, reason, matched = run(StopChecker(SamplingParams(stop_regex=("b+",)), decode), ids)
    assert (deltas, reason, matched) == (["x", "a", "b"], "stop", "b+")
    deltas, reason, matched = run(StopChecker(SamplingParams(stop_regex=("bc",)), decode), ids)
    assert ("".join(deltas), reason, matched) == ("xa", "stop", "bc")
    both = StopChecker(SamplingParams(stop_regex=("c", "a"), min_tokens=3), decode)
    assert run(both, ids)[2] == "c"  # from min_tokens on: the "a" came before; "c" is first


def test_an_empty_stop_string_ends_at_the_first_token_and_cuts_nothing() -> None:
    deltas, reason, matched = run(StopChecker(SamplingParams(stop=("",)), decode), ids_of("ab"))
    assert (deltas, reason, matched) == (["ab"], "stop", "")
