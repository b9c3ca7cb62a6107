"""A tokenizer's vocabulary as the constrained decoder sees it: each ordinary token is a byte
string, each special token (EOS, ``<|tool_call_begin|>``, ``</think>``...) is one atomic symbol
known by its text. Works with any tokenizer that can list its tokens' bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path

from ember.errors import CheckpointError


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet: printable stand-in character -> byte value.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes are mapped, in order, to
    code points from 256 on. (Every byte-level BPE tokenizer.json spells tokens this way.)
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in keep}
    extra = 0
    for b in range(256):
        if b not in keep:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class TokenTrie:
    """All ordinary tokens in one byte trie, flattened into lists for fast walking:
    ``children[n]`` is a tuple of ``(byte, child)``, ``ends[n]`` the token ids spelled by the
    path to ``n``."""

    def __init__(self, entries: Iterable[tuple[bytes, int]]) -> None:
        maps: list[dict[int, int]] = [{}]
        ends: list[list[int]] = [[]]
        for data, token_id in entries:
            node = 0
            for byte in data:
                nxt = maps[node].get(byte)
                if nxt is None:
                    nxt = len(maps)
                    maps[node][byte] = nxt
                    maps.append({})
                    ends.append([])
                node = nxt
            ends[node].append(token_id)
        self.children: list[tuple[tuple[int, int], ...]] = [tuple(m.items()) for m in maps]
        self.ends: list[tuple[int, ...]] = [tuple(e) for e in ends]

    def __len__(self) -> int:
        return len(self.children)


class TokenVocabulary:
    """``tokens[i]`` is token ``i``'s bytes (None for ids without an ordinary spelling);
    ``special`` maps special token ids to their text; ``eos_ids`` are the ids that end
    generation (allowed exactly when the grammar is complete).

    One vocabulary serves grammars on several threads at once (the model server's engine
    thread and its grammar builder). Besides the data given here it holds only caches:
    ``trie`` and ``byte_sets``, computed on first use, and ``loop_classes``, whose entries
    masks.py adds (and, past a bound, clears) with one dict operation each, keeping the entry
    it took in a local. Two threads filling the same cache at once each compute an equal value
    and one is kept: sharing the vocabulary needs no lock."""

    def __init__(
        self,
        tokens: Sequence[bytes | None],
        special: Mapping[int, str] | None = None,
        eos_ids: Iterable[int] = (),
    ) -> None:
        self.tokens = list(tokens)
        self.special = dict(special or {})
        self.eos_ids = frozenset(eos_ids)
        top = max([len(self.tokens) - 1, *self.special, *self.eos_ids], default=-1)
        self.size = top + 1
        if len(self.tokens) < self.size:
            self.tokens.extend([None] * (self.size - len(self.tokens)))
        for token_id in (*self.special, *self.eos_ids):
            self.tokens[token_id] = None
        # masks.py keeps its per-vocabulary splits here (see LoopClass).
        self.loop_classes: dict[int, object] = {}
        self.special_ids = {text: token_id for token_id, text in self.special.items()}

    @cached_property
    def trie(self) -> TokenTrie:
        return TokenTrie((t, i) for i, t in enumerate(self.tokens) if t)

    @cached_property
    def byte_sets(self) -> list[int]:
        """Per token, the set of bytes it contains as a 256-bit int (0 for special ids)."""
        out = []
        for data in self.tokens:
            bits = 0
            for byte in data or b"":
                bits |= 1 << byte
            out.append(bits)
        return out

    def token_text(self, token_id: int) -> str:
        if token_id in self.special:
            return self.special[token_id]
        return (self.tokens[token_id] or b"").decode("utf-8", errors="replace")

    @classmethod
    def from_tokenizer_json(
        cls, source: str | Path | Mapping, *, eos_tokens: Iterable[str] = ()
    ) -> TokenVocabulary:
        """Read a Hugging Face ``tokenizer.json`` with a byte-level BPE model. Every added
        token becomes a special symbol spelled by its content; ``eos_tokens`` names the
        added tokens that end a turn (``<|im_end|>``, ``<|user|>``, ``<|endoftext|>``...)."""
        where = str(source) if not isinstance(source, Mapping) else "tokenizer.json"
        data = source if isinstance(source, Mapping) else json.loads(Path(source).read_text())
        model = data.get("model") or {}
        vocab = model.get("vocab")
        if model.get("type") != "BPE" or not isinstance(vocab, Mapping):
            raise CheckpointError(f"{where}: expected a BPE model with a vocab mapping")
        alphabet = byte_level_alphabet()
        size = max([*vocab.values(), *(t["id"] for t in data.get("added_tokens", []))]) + 1
        tokens: list[bytes | None] = [None] * size
        for text, token_id in vocab.items():
            try:
                tokens[token_id] = bytes(alphabet[ch] for ch in text)
            except KeyError as exc:
                raise CheckpointError(
                    f"{where}: token {text!r} is not byte-level BPE (no byte for {exc.args[0]!r})"
                ) from None
        special = {t["id"]: t["content"] for t in data.get("added_tokens", [])}
        by_text = {text: token_id for token_id, text in special.items()}
        missing = [t for t in eos_tokens if t not in by_text]
        if missing:
            raise CheckpointError(f"{where}: no added token named {missing[0]!r}")
        return cls(tokens, special, [by_text[t] for t in eos_tokens])
