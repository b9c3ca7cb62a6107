"""Object keys, enum values and excluded names are matched on one byte trie: the same answers
as the prefix-set definition (``ReferenceKeys``) on random key sets, at a size linear in the
keys' bytes (review26: one prefix set per start position was quadratic in optional keys)."""

from __future__ import annotations

import random
import tracemalloc

from ember.models.constrain.grammar import END, advance, initial_state
from ember.models.constrain.json_nodes import O_KEY, JObject
from ember.models.constrain.key_trie import ROOT, ByteTrie, ReferenceKeys
from ember.models.constrain.nodes import CONSUME
from ember.models.constrain.schema import compile_schema


def _random_keys(rng: random.Random) -> list[bytes]:
    # A small alphabet (with an escaped quote) makes keys that are prefixes of one another.
    alphabet = [b"a", b"b", b"c", b'\\"', b"\xc3\xa9"]
    keys: dict[bytes, None] = {}
    for _ in range(rng.randint(0, 12)):
        keys[b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))] = None
    return list(keys)


def _key_moves(obj: JObject, start: int, prefix: bytes) -> tuple[list[int], int | None]:
    """Through ``JObject.step``: the bytes that extend ``prefix`` as a key from ``start``, and
    the property index a closing quote picks (None: the key cannot end here)."""
    node: int | None = ROOT
    for byte in prefix:
        moves = obj.step((O_KEY, start, node), byte)
        if not moves or moves[0][1][0] != O_KEY:
            return [], None
        node = moves[0][1][2]
    extend = [
        sym
        for sym in range(256)
        if any(m[0] == CONSUME and m[1][0] == O_KEY for m in obj.step((O_KEY, start, node), sym))
    ]
    closed = [m[1][1] for m in obj.step((O_KEY, start, node), 0x22) if m[1][0] != O_KEY]
    return extend, closed[0] if closed else None


def test_object_keys_match_the_reference_on_random_key_sets() -> None:
    rng = random.Random(26)
    for _ in range(300):
        keys = _random_keys(rng)
        required = [rng.random() < 0.3 for _ in keys]
        obj = JObject(
            [(k, compile_schema(True), r) for k, r in zip(keys, required, strict=True)], None, 0
        )
        reference = ReferenceKeys(keys, required)
        for start in range(len(keys)):
            probes = set(reference.prefixes[start]) | {k + b"a" for k in keys} | {b"z"}
            for prefix in probes:
                extend, closed = _key_moves(obj, start, prefix)
                allowed = prefix in reference.prefixes[start]
                want = sorted(
                    {
                        p[len(prefix)]
                        for p in reference.prefixes[start]
                        if len(p) > len(prefix) and p.startswith(prefix)
                    }
                )
                assert extend == (want if allowed else []), (keys, required, start, prefix)
                expected = reference.index[start].get(prefix) if allowed else None
                if expected is not None and 0x22 in want:
                    expected = None  # a quote inside a key follows a backslash: it extends
                assert closed == expected, (keys, required, start, prefix)


def test_trie_walk_matches_prefix_sets_with_index_windows() -> None:
    rng = random.Random(7)
    for _ in range(200):
        keys = _random_keys(rng)
        trie = ByteTrie(keys)
        low = rng.randint(0, len(keys))
        high = rng.randint(low - 1, len(keys))
        window = keys[low : high + 1]
        prefixes = {k[:i] for k in window for i in range(len(k) + 1)}
        for probe in prefixes | {k + b"b" for k in keys} | {b"q"}:
            node = trie.walk(probe, low, high)
            assert (node is not None) == (probe in prefixes), (keys, low, high, probe)
            if node is not None and probe in window:
                assert trie.ends[node] == keys.index(probe)


def _peak_bytes(schema: object) -> int:
    tracemalloc.start()
    try:
        compile_schema(schema)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_optional_properties_cost_linear_space() -> None:
    # review26 p7: 2000 optional properties of 24-character names built 4.1 GiB of prefix sets
    # (one per start position); 600 of them built ~300 MiB. The trie holds ~15,000 bytes' worth.
    names = [f"{j:06d}_{j * 7919:017x}" for j in range(600)]
    schema = {"type": "object", "properties": {n: {"type": "boolean"} for n in names}}
    obj = compile_schema(schema)
    assert isinstance(obj, JObject)
    assert obj.trie.size() <= 2 * sum(len(n) + 1 for n in names)
    assert _peak_bytes(schema) < 16 * 2**20


def test_long_names_and_values_cost_linear_space() -> None:
    # A set of every prefix of a 20,000-byte string is 200 MB; the grammar must still match it.
    long = "x" * 20_000
    for schema in (
        {"const": long},
        {"type": "object", "properties": {long: {"type": "null"}}, "additionalProperties": True},
    ):
        assert _peak_bytes(schema) < 16 * 2**20
    node = compile_schema({"const": long})
    state = initial_state(node)
    for byte in f'"{long}"'.encode():
        state = advance(state, byte)
    assert () in advance(state, END)
