"""The shipped byte-level BPE tokenizers: round trips, special tokens, streaming decode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.processors import TemplateProcessing

from ember.errors import CheckpointError, InvalidModelInput
from ember.models.tokenizer import Tokenizer
from ember.models.training.families import FAMILIES, NUM_BPE_TOKENS, VOCAB_SIZE
from tests.models.chat_fixtures import family_tokenizer

FAMILY_NAMES = sorted(FAMILIES)


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def tok(family: str) -> Tokenizer:
    return family_tokenizer(family)


def test_vocabulary_has_the_family_special_tokens_at_the_top(tok: Tokenizer, family: str) -> None:
    assert tok.vocab_size == VOCAB_SIZE
    for offset, token in enumerate(FAMILIES[family].all_special_tokens()):
        assert tok.token_id(token) == NUM_BPE_TOKENS + offset
        assert tok.encode(token) == [NUM_BPE_TOKENS + offset]
    assert tok.special_ids == frozenset(range(NUM_BPE_TOKENS, VOCAB_SIZE))


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_round_trips(tok: Tokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text, allow_special=False)) == text


def test_source_code_round_trips_and_compresses(tok: Tokenizer) -> None:
    code = 'def f(self, x):\n    """Dobrý den, 世界 😀."""\n\treturn {"a": x ** 2}  # ok\n'
    assert tok.decode(tok.encode(code)) == code
    plain = (
        "def __init__(self, name, value=None):\n        self.name = name\n        return value\n"
    )
    assert len(plain) / len(tok.encode(plain)) > 3.0


def test_special_token_text_is_plain_text_when_specials_are_not_allowed(tok: Tokenizer) -> None:
    text = "x <think> y [gMASK] <|im_end|>"
    plain = tok.encode(text, allow_special=False)
    assert not set(plain) & tok.special_ids
    assert tok.decode(plain) == text


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_incremental_decode_equals_one_shot_decode(tok: Tokenizer, data: st.DataObject) -> None:
    ids = data.draw(st.lists(st.integers(0, tok.vocab_size - 1), max_size=30))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=5)))
    skip = data.draw(st.booleans())
    decoder = tok.incremental_decoder(skip_special_tokens=skip)
    pieces, start = [], 0
    for cut in [*cuts, len(ids)]:
        pieces.append(decoder.push(ids[start:cut]))
        start = cut
    pieces.append(decoder.finish())
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=skip)


def test_incremental_decode_never_splits_a_character(tok: Tokenizer) -> None:
    text = "naïve 日本語 😀 done"
    ids = tok.encode(text)
    decoder = tok.incremental_decoder()
    pieces = [decoder.push([i]) for i in ids] + [decoder.finish()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_out_of_range_ids_are_refused(tok: Tokenizer) -> None:
    with pytest.raises(InvalidModelInput, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])
    with pytest.raises(InvalidModelInput):
        tok.incremental_decoder().push([-1])


def test_missing_tokenizer_file_is_a_checkpoint_error(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="tokenizer.json"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not a tokenizers file"):
        Tokenizer.from_dir(tmp_path)


def test_special_affixes_are_what_the_post_processor_adds(tok: Tokenizer) -> None:
    # The shipped tokenizers add nothing; one that adds a BOS (a Llama-style post-processor)
    # is read the same way, and wrapping equals encoding with HF's add_special_tokens.
    assert tok.special_affixes == ((), ())
    backend = HFTokenizer.from_str(tok.backend.to_str())
    first = min(tok.special_ids)
    name = tok.backend.id_to_token(first)
    backend.post_processor = TemplateProcessing(
        single=f"{name} $A {name}", special_tokens=[(name, first)]
    )
    wrapped = Tokenizer.from_backend(backend)
    text = "def f(x):\n    return x"
    assert wrapped.special_affixes == ((first,), (first,))
    expected = backend.encode(text, add_special_tokens=True).ids
    assert wrapped.with_special_tokens(wrapped.encode(text)) == expected


def test_token_strings_are_the_vocabulary_pieces(tok: Tokenizer) -> None:
    ids = tok.encode("import os")
    assert tok.token_strings(ids) == [tok.backend.id_to_token(i) for i in ids]
    with pytest.raises(InvalidModelInput):
        tok.token_strings([tok.vocab_size])
