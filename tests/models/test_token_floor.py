"""The byte bound on a text's token count never exceeds the real count (so a prompt it refuses
could not have fit), for every shipped checkpoint's tokenizer; a tokenizer that can drop text
gets no bound; long texts take the GIL-free encoding path and get the same ids."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from ember.models.catalog import SHIPPED_CHECKPOINTS
from ember.models.chat_encode import encode_marked, marked_text_bytes, render_chat
from ember.models.token_floor import at_least, longest_token_bytes
from ember.models.tokenizer import UNLOCKED_ENCODE_CHARS, Tokenizer, _byte_level_table

SHIPPED = ["glm4moe-tiny", "kimi-tiny", "glmdsa-tiny"]
SYMBOLS = tuple(_byte_level_table())
HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module", params=SHIPPED)
def tok(request: pytest.FixtureRequest) -> Tokenizer:
    return Tokenizer.from_dir(SHIPPED_CHECKPOINTS / request.param)


def _dense_pieces(tok: Tokenizer) -> list[str]:
    """The texts of the longest tokens and of every special token: the densest text there is
    in bytes per token, where the bound is tightest."""
    longest = sorted(range(tok.vocab_size), key=lambda i: len(tok.token_bytes[i]))[-40:]
    pieces = [tok.token_bytes[i].decode("utf-8", "ignore") for i in longest]
    return pieces + [tok.decode([i]) for i in sorted(tok.special_ids)]


def _texts(tok: Tokenizer) -> st.SearchStrategy[str]:
    piece = st.one_of(
        st.sampled_from(_dense_pieces(tok)),
        st.text(max_size=12),  # any character: multi-byte, control, surrogate-free
        st.sampled_from([" ", "\n", "\t", "    ", "é", "世界", "😀", "<|", "|>"]),
    )
    return st.lists(piece, max_size=80).map("".join)


def test_every_shipped_tokenizer_has_a_bound(tok: Tokenizer) -> None:
    assert tok.max_token_bytes == max(len(data) for data in tok.token_bytes)


@settings(max_examples=150, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_a_text_has_at_least_its_bytes_over_the_longest_token(
    tok: Tokenizer, data: st.DataObject
) -> None:
    text = data.draw(_texts(tok))
    longest = tok.max_token_bytes
    assert longest is not None
    floor = at_least(len(text.encode("utf-8")), longest)
    # Whatever window the bound refuses a prompt for (floor >= window), the real count is
    # past it as well: the real count is never below the bound.
    assert len(tok.encode(text)) >= floor
    assert len(tok.encode(text, allow_special=False)) >= floor  # control text kept as text


@settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_a_rendered_chat_prompt_has_at_least_its_bytes_over_the_longest_token(
    tok: Tokenizer, data: st.DataObject
) -> None:
    texts = _texts(tok)
    messages = [
        {"role": "system", "content": data.draw(texts)},
        {"role": "user", "content": data.draw(texts)},
    ]
    if data.draw(st.booleans()):
        messages += [
            {"role": "assistant", "content": data.draw(texts)},
            {"role": "user", "content": data.draw(texts)},
        ]
    # What the server measures (the marked rendering) against what it feeds the engine.
    text = render_chat(tok, messages)
    longest = tok.max_token_bytes
    assert longest is not None
    assert len(encode_marked(tok, text)) >= at_least(marked_text_bytes(text), longest)


def test_dense_text_comes_close_to_the_bound(tok: Tokenizer) -> None:
    # The bound is no vacuous zero: a run of the longest token's text meets it almost exactly.
    longest = max(range(tok.vocab_size), key=lambda i: len(tok.token_bytes[i]))
    text = tok.token_bytes[longest].decode("utf-8") * 50
    assert tok.max_token_bytes is not None
    floor = at_least(len(text.encode("utf-8")), tok.max_token_bytes)
    assert floor <= len(tok.encode(text)) <= 2 * floor


@settings(max_examples=8, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_long_texts_encode_as_the_plain_call_does(tok: Tokenizer, data: st.DataObject) -> None:
    # The GIL-free path (encode_batch_fast) against the reference (encode), past its threshold.
    pieces = data.draw(st.lists(_texts(tok), min_size=1, max_size=8))
    text = "".join(pieces)
    text = (text or "x") * (UNLOCKED_ENCODE_CHARS // max(1, len(text)) + 1)
    assert len(text) >= UNLOCKED_ENCODE_CHARS
    assert tok.encode(text) == tok.backend.encode(text, add_special_tokens=False).ids
    plain = tok._plain_backend.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, allow_special=False) == plain


# -- tokenizers that can lose text get no bound -----------------------------------------------


def _spec() -> dict[str, Any]:
    path = SHIPPED_CHECKPOINTS / "glm4moe-tiny" / "tokenizer.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _nfkc(spec: dict) -> None:
    spec["normalizer"] = {"type": "NFKC"}


def _truncating(spec: dict) -> None:
    spec["truncation"] = {
        "direction": "Right",
        "max_length": 8,
        "strategy": "LongestFirst",
        "stride": 0,
    }


def _removing(spec: dict) -> None:
    spec["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"


def _whitespace_split(spec: dict) -> None:
    spec["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "WhitespaceSplit"})


def _no_byte_level(spec: dict) -> None:
    spec["pre_tokenizer"] = spec["pre_tokenizer"]["pretokenizers"][0]


def _missing_byte(spec: dict) -> None:
    del spec["model"]["vocab"]["Ġ"]  # the space byte


def _lstrip(spec: dict) -> None:
    spec["added_tokens"][0]["lstrip"] = True


@pytest.mark.parametrize(
    "change",
    [_nfkc, _truncating, _removing, _whitespace_split, _no_byte_level, _missing_byte, _lstrip],
)
def test_a_tokenizer_that_can_drop_text_has_no_bound(change: Callable[[dict], None]) -> None:
    tok = Tokenizer.from_dir(SHIPPED_CHECKPOINTS / "glm4moe-tiny")
    spec = _spec()
    assert longest_token_bytes(spec, tok.token_bytes, SYMBOLS) == tok.max_token_bytes
    change(spec)
    assert longest_token_bytes(spec, tok.token_bytes, SYMBOLS) is None


def test_an_added_token_that_swallows_whitespace_would_break_the_bound() -> None:
    # Why lstrip tokens void the bound, on the real library: one token for ~200 bytes.
    spec = _spec()
    spec["added_tokens"][0]["lstrip"] = True
    backend = HFTokenizer.from_str(json.dumps(spec))
    tok = Tokenizer.from_backend(backend)
    special = spec["added_tokens"][0]["content"]
    text = " " * 200 + special
    longest = max(len(data) for data in tok.token_bytes)
    assert len(tok.encode(text)) < at_least(len(text.encode("utf-8")), longest)
    assert tok.max_token_bytes is None
