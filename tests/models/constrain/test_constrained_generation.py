"""Random schemas, random choices among the allowed tokens: the output always parses and
validates (jsonschema is the independent judge), and the fast masks equal the slow ones."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from ember.models.constrain.grammar import Grammar
from ember.models.constrain.masks import TokenMask, compute_mask, reference_mask
from ember.models.constrain.session import (
    ConstrainedDecoder,
    ConstraintSpec,
    ConstraintViolation,
    GrammarCache,
    build_root,
)
from tests.models.constrain.fixtures import (
    detokenize,
    random_schema,
    sample_tokens,
    small_vocab,
    standard_schema,
)

VOCAB = small_vocab()


@pytest.mark.parametrize("seed", range(40))
def test_random_schema_random_tokens_always_valid(seed: int) -> None:
    rng = random.Random(seed)
    schema = random_schema(rng)
    cache = GrammarCache()
    for sample in range(3):
        decoder = cache.decoder(ConstraintSpec(json="schema", schema=schema), VOCAB)
        text = detokenize(VOCAB, sample_tokens(decoder, random.Random(seed * 7 + sample)))
        value = json.loads(text)
        jsonschema.Draft202012Validator(standard_schema(schema)).validate(value)


@pytest.mark.parametrize("seed", range(8))
def test_json_object_mode_always_gives_an_object(seed: int) -> None:
    decoder = GrammarCache().decoder(ConstraintSpec(json="object"), VOCAB)
    text = detokenize(VOCAB, sample_tokens(decoder, random.Random(seed)))
    assert isinstance(json.loads(text), dict)


def _walk_states(grammar: Grammar, rng: random.Random, steps: int) -> list:
    """States met on a random walk (stepping bytes and specials through the grammar)."""
    decoder = ConstrainedDecoder(grammar, VOCAB)
    states = [decoder.state]
    for _ in range(steps):
        if decoder.is_finished:
            break
        allowed = decoder.allowed_token_mask().token_ids()
        decoder.advance(rng.choice(allowed))
        states.append(decoder.state)
    return states


@pytest.mark.parametrize("seed", range(6))
def test_fast_masks_equal_reference(seed: int) -> None:
    rng = random.Random(100 + seed)
    spec = ConstraintSpec(json="schema", schema=random_schema(rng))
    grammar = Grammar(build_root(spec, VOCAB.special_ids))
    for state in _walk_states(grammar, rng, 40)[::3]:
        fast = compute_mask(grammar, VOCAB, grammar.intern(state))
        assert fast == reference_mask(state, VOCAB)


def test_masks_survive_a_table_reset() -> None:
    spec = ConstraintSpec(json="schema", schema={"type": "array", "items": {"type": "string"}})
    grammar = Grammar(build_root(spec, VOCAB.special_ids), max_states=5)
    decoder = ConstrainedDecoder(grammar, VOCAB)
    text = detokenize(VOCAB, sample_tokens(decoder, random.Random(3)))
    assert isinstance(json.loads(text), list)
    assert grammar.epoch > 1  # the table was dropped along the way and rebuilt


def test_decoder_refuses_a_masked_token_and_eos_before_the_end() -> None:
    decoder = GrammarCache().decoder(
        ConstraintSpec(json="schema", schema={"type": "boolean"}), VOCAB
    )
    eos = next(iter(VOCAB.eos_ids))
    brace = VOCAB.tokens.index(b"{")
    assert not decoder.accepts(brace) and not decoder.accepts(eos)
    with pytest.raises(ConstraintViolation, match="not allowed by the grammar"):
        decoder.advance(brace)
    decoder.advance(VOCAB.tokens.index(b"true"))
    assert decoder.is_finished and decoder.can_end
    assert decoder.allowed_token_mask().token_ids() == [eos]
    decoder.advance(eos)
    assert decoder.allowed_token_mask() == TokenMask(0, VOCAB.size)


def test_top_level_number_lets_the_model_choose_when_to_stop() -> None:
    decoder = GrammarCache().decoder(
        ConstraintSpec(json="schema", schema={"type": "integer"}), VOCAB
    )
    decoder.advance(VOCAB.tokens.index(b"12"))
    eos = next(iter(VOCAB.eos_ids))
    mask = decoder.allowed_token_mask()
    assert not decoder.is_finished and decoder.can_end
    assert mask.allows(eos) and mask.allows(VOCAB.tokens.index(b"3"))
    assert not mask.allows(VOCAB.tokens.index(b"."))


def test_token_mask_packing() -> None:
    mask = TokenMask.from_ids([0, 9, 15, 16], 17)
    assert mask.packed() == bytes([0b00000001, 0b10000010, 0b00000001])
    assert mask.token_ids() == [0, 9, 15, 16] and mask.count() == 4
    assert mask.allows(9) and not mask.allows(8) and not mask.allows(17)
