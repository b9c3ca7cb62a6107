"""Which tokens may come next: a walk of the vocabulary's byte trie with the matcher.

For a matcher state, a token is allowed when every one of its bytes is accepted in turn (or,
for a special token, when the grammar takes that symbol; for EOS, when the grammar is
complete). The walk follows the trie, so a rejected prefix prunes every token below it, and
transitions come from the grammar's memoised automaton.

Inside a string or free text, almost every byte leads back to the same state (a self-loop).
For such states the vocabulary is split once per distinct loop set: tokens made only of loop
bytes are allowed wholesale, and only the rest (re-rooted at their first non-loop byte, where
the state is still the same) is walked. Masks are cached per state, so a state seen before
costs a dict lookup.

``reference_mask`` is the slow definition (every token fed byte by byte through the uncached
matcher), kept for tests.
"""

from __future__ import annotations

from collections.abc import Iterable

from ember.models.constrain.grammar import DEAD, END, Grammar, State, advance
from ember.models.constrain.nodes import SPECIAL_BASE
from ember.models.constrain.vocab import TokenTrie, TokenVocabulary

# Bytes probed to guess whether a state loops before paying for the full 256-byte loop set.
LOOP_PROBES = b"ae "
LOOP_MIN_BYTES = 64
MAX_LOOP_CLASSES = 16
# Cached masks per grammar are bounded by bytes (a mask is vocab_size / 8 bytes: 1 KiB at 8192
# tokens, 20 KiB at Kimi's 163840), at least this many entries.
MASK_CACHE_BYTES = 32 * 2**20
MIN_CACHED_MASKS = 64


class TokenMask:
    """A set of allowed token ids as a bitset (bit ``i`` set: token ``i`` allowed)."""

    __slots__ = ("bits", "size")

    def __init__(self, bits: int, size: int) -> None:
        self.bits = bits
        self.size = size

    @classmethod
    def from_ids(cls, ids: Iterable[int], size: int) -> TokenMask:
        packed = bytearray((size + 7) // 8)
        for token_id in ids:
            packed[token_id >> 3] |= 1 << (token_id & 7)
        return cls(int.from_bytes(packed, "little"), size)

    def allows(self, token_id: int) -> bool:
        return 0 <= token_id < self.size and (self.bits >> token_id) & 1 == 1

    def count(self) -> int:
        return self.bits.bit_count()

    def token_ids(self) -> list[int]:
        packed = self.packed()
        return [
            (i << 3) | j for i, byte in enumerate(packed) if byte for j in range(8) if byte >> j & 1
        ]

    def packed(self) -> bytes:
        """Little-endian bit order: token ``i`` is bit ``i % 8`` of byte ``i // 8``."""
        return self.bits.to_bytes((self.size + 7) // 8, "little")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenMask) and (self.bits, self.size) == (other.bits, other.size)

    def __hash__(self) -> int:
        return hash((self.bits, self.size))

    def __repr__(self) -> str:
        return f"TokenMask({self.count()} of {self.size})"


class LoopClass:
    """The vocabulary split for one set of self-loop bytes."""

    __slots__ = ("whole", "residual")

    def __init__(self, vocab: TokenVocabulary, loop_bits: int) -> None:
        whole: list[int] = []
        residual: list[tuple[bytes, int]] = []
        outside = ~loop_bits
        for token_id, (data, bits) in enumerate(zip(vocab.tokens, vocab.byte_sets, strict=True)):
            if not data:
                continue
            if bits & outside == 0:
                whole.append(token_id)
                continue
            first = next(i for i, byte in enumerate(data) if not loop_bits >> byte & 1)
            residual.append((data[first:], token_id))
        self.whole = TokenMask.from_ids(whole, vocab.size).bits
        self.residual = TokenTrie(residual)


def _loop_bits(grammar: Grammar, sid: int) -> int:
    cached = grammar.loop_cache.get(sid)
    if cached is not None:
        return cached
    bits = 0
    if any(grammar.next(sid, probe) == sid for probe in LOOP_PROBES):
        for byte in range(256):
            if grammar.next(sid, byte) == sid:
                bits |= 1 << byte
    grammar.loop_cache[sid] = bits
    return bits


def _walk(grammar: Grammar, trie: TokenTrie, sid: int, out: list[int]) -> None:
    children, ends = trie.children, trie.ends
    rows, step = grammar.transitions, grammar.next
    stack = [(0, sid)]
    while stack:
        node, state = stack.pop()
        row = rows[state]
        for byte, child in children[node]:
            nxt = row.get(byte)
            if nxt is None:
                nxt = step(state, byte)
            if nxt == DEAD:
                continue
            found = ends[child]
            if found:
                out.extend(found)
            if children[child]:
                stack.append((child, nxt))


def compute_mask(grammar: Grammar, vocab: TokenVocabulary, sid: int) -> TokenMask:
    """The allowed tokens in state ``sid`` (cached per state)."""
    cached = grammar.mask_cache.get(sid)
    if cached is not None:
        return cached  # type: ignore[return-value]
    allowed: list[int] = []
    whole = 0
    if sid != DEAD:
        for token_id in vocab.special:
            if token_id not in vocab.eos_ids and grammar.next(sid, SPECIAL_BASE + token_id) != DEAD:
                allowed.append(token_id)
        if grammar.accepts_end(sid):
            allowed.extend(vocab.eos_ids)
        loop = _loop_bits(grammar, sid)
        if loop.bit_count() >= LOOP_MIN_BYTES:
            # Per vocabulary: only a handful of distinct loop sets occur (string bodies, free
            # text before a given terminator), each worth splitting the vocabulary for once.
            classes = vocab.loop_classes
            split = classes.get(loop)
            if split is None:
                if len(classes) >= MAX_LOOP_CLASSES:
                    classes.clear()
                split = classes[loop] = LoopClass(vocab, loop)
            whole = split.whole
            _walk(grammar, split.residual, sid, allowed)
        else:
            _walk(grammar, vocab.trie, sid, allowed)
    mask = TokenMask.from_ids(allowed, vocab.size)
    if whole:
        mask = TokenMask(mask.bits | whole, vocab.size)
    if len(grammar.mask_cache) >= max(MIN_CACHED_MASKS, MASK_CACHE_BYTES // (vocab.size // 8 + 1)):
        grammar.mask_cache.clear()
    grammar.mask_cache[sid] = mask
    return mask


def reference_mask(state: State, vocab: TokenVocabulary) -> TokenMask:
    """Slow reference: feed every token through the uncached matcher."""
    allowed = []
    for token_id, data in enumerate(vocab.tokens):
        if token_id in vocab.eos_ids:
            if () in advance(state, END):
                allowed.append(token_id)
            continue
        if token_id in vocab.special:
            if advance(state, SPECIAL_BASE + token_id):
                allowed.append(token_id)
            continue
        if not data:
            continue
        current = state
        for byte in data:
            current = advance(current, byte)
            if not current:
                break
        if current:
            allowed.append(token_id)
    return TokenMask.from_ids(allowed, vocab.size)
