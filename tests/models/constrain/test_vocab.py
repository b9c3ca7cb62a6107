"""Vocabularies from a byte-level BPE tokenizer.json, and the trie the masks walk."""

from __future__ import annotations

import json
import re

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from ember.errors import CheckpointError
from ember.models.constrain.vocab import TokenVocabulary, byte_level_alphabet


def test_byte_level_alphabet_is_gpt2s() -> None:
    table = byte_level_alphabet()
    assert sorted(table.values()) == list(range(256))
    assert table["Ġ"] == 0x20 and table["Ċ"] == 0x0A and table["A"] == 0x41
    assert set(table) == set(pre_tokenizers.ByteLevel.alphabet())


def _trained(special: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    text = ['{"name": "Ada", "tags": ["x"]}', "def main():\n    return 'héllo'\n"] * 50
    tokenizer.train_from_iterator(text, trainer)
    return tokenizer


def test_from_tokenizer_json_decodes_every_token_to_its_bytes() -> None:
    tokenizer = _trained(["<|eos|>", "<tool_call>"])
    data = json.loads(tokenizer.to_str())
    vocab = TokenVocabulary.from_tokenizer_json(data, eos_tokens=["<|eos|>"])
    eos, call = tokenizer.token_to_id("<|eos|>"), tokenizer.token_to_id("<tool_call>")
    assert vocab.eos_ids == {eos} and vocab.special_ids["<tool_call>"] == call
    assert vocab.tokens[eos] is None and vocab.tokens[call] is None
    text = "return 'héllo'"
    ids = tokenizer.encode(text).ids
    assert b"".join(vocab.tokens[i] for i in ids).decode() == text


def test_from_tokenizer_json_names_what_is_wrong() -> None:
    with pytest.raises(CheckpointError, match="expected a BPE model"):
        TokenVocabulary.from_tokenizer_json({"model": {"type": "WordPiece", "vocab": {}}})
    data = json.loads(_trained(["<|eos|>"]).to_str())
    with pytest.raises(CheckpointError, match=re.escape("no added token named '<|im_end|>'")):
        TokenVocabulary.from_tokenizer_json(data, eos_tokens=["<|im_end|>"])


def test_trie_spells_every_token() -> None:
    vocab = TokenVocabulary([b"a", b"ab", b"b", None, b"abc"], {3: "<s>"}, eos_ids=[3])
    trie = vocab.trie
    found = {}
    stack = [(0, b"")]
    while stack:
        node, path = stack.pop()
        for token in trie.ends[node]:
            found[token] = path
        stack.extend((child, path + bytes([byte])) for byte, child in trie.children[node])
    assert found == {0: b"a", 1: b"ab", 2: b"b", 4: b"abc"}
