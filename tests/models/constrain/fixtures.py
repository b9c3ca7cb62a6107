"""Test vocabularies, random JSON schemas, and a random driver that samples only allowed tokens."""

from __future__ import annotations

import random

from ember.models.constrain.grammar import DEAD, Grammar
from ember.models.constrain.regex_automaton import RegexAutomaton
from ember.models.constrain.session import ConstrainedDecoder
from ember.models.constrain.vocab import TokenVocabulary

EOS = "<|eos|>"
MARKERS = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<think>",
    "</think>",
)
SAMPLE = (
    '{"name": "Ada", "tags": ["a", "b"], "ok": true, "n": null, "x": -12.5e+3}\n'
    'The quick brown fox said "hi" \\ and café naïve 日本語 🙂 \t done.\n'
    "functions.get_weather:0 get_weather city Paris days 3 [1, 2, 3] {}\n"
    '\\u00e9 \\n \\" \\\\ </arg_value> </think> <tool_call> 0123456789'
)
PIECES = (
    b'{"',
    b'"}',
    b'":',
    b'": ',
    b'", "',
    b"},",
    b"}]",
    b'[{"',
    b"],",
    b"true",
    b"false",
    b"null",
    b"\\n",
    b'\\"',
    b"\\u",
    b"00e9",
    b"\xc3\xa9",
    b"\xe2\x82",
    b"\xac",
    b"\xf0\x9f",
    b"\x99\x82",
    b"name",
    b" the",
    b"functions.",
    b":0",
    b":1",
    b"get_weather",
    b"city",
    b"  ",
    b"\n  ",
    b"0.",
    b"e+",
    b"12",
    b"</",
    b"think>",
    b"arg_value>",
    b"<tool",
    b"_call>",
    b'"a"',
    b'"b"',
)


def small_vocab(seed: int = 0, extra: int = 400, special_markers: bool = True) -> TokenVocabulary:
    """256 single bytes, hand-picked pieces (partial UTF-8, escapes, marker spellings), random
    substrings of a sample text, then EOS and (optionally) the markers as special tokens."""
    rng = random.Random(seed)
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    for piece in PIECES:
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
    sample = SAMPLE.encode()
    while len(tokens) < 256 + len(PIECES) + extra:
        start = rng.randrange(len(sample) - 2)
        piece = sample[start : start + rng.randint(2, 8)]
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
    special = {len(tokens): EOS}
    tokens.append(None)
    for text in MARKERS:
        if special_markers:
            special[len(tokens)] = text
            tokens.append(None)
        elif text.encode() not in seen:  # whole-marker ordinary tokens, as a BPE would learn
            tokens.append(text.encode())
    return TokenVocabulary(tokens, special, eos_ids=[min(special)])


CLOSERS = frozenset(b'"}],')


class WalkDidNotFinish(AssertionError):
    """A random walk ran out of steps before the grammar finished: a grammar whose only endings
    are rare (a raw string that must end in "5" before its closing marker) can outlast any step
    bound, so a caller may draw another walk rather than call the grammar wrong."""


MARKER_BYTES = frozenset(m.encode() for m in MARKERS)


def sample_tokens(
    decoder: ConstrainedDecoder, rng: random.Random, *, max_steps: int = 4000, closing: float = 0.35
) -> list[int]:
    """Random allowed tokens until the grammar finishes; with probability ``closing`` prefer
    tokens that close something (so random walks end)."""
    vocab = decoder.vocab
    chosen: list[int] = []
    for _ in range(max_steps):
        if decoder.is_finished:
            return chosen
        allowed = decoder.allowed_token_mask().token_ids()
        assert allowed, "a grammar state with no allowed token"
        pick = allowed
        if rng.random() < closing:
            markers = [t for t in allowed if t in vocab.special or vocab.tokens[t] in MARKER_BYTES]
            closers = [t for t in allowed if CLOSERS & set(vocab.tokens[t] or b"")]
            pick = markers or closers or allowed
        token = rng.choice(pick)
        decoder.advance(token)
        chosen.append(token)
    raise WalkDidNotFinish(f"did not finish in {max_steps} steps")


def detokenize(vocab: TokenVocabulary, ids: list[int]) -> str:
    """Bytes of ordinary tokens decoded as UTF-8 (strictly), special tokens by their text;
    EOS left out."""
    out = bytearray()
    for token in ids:
        if token in vocab.eos_ids:
            continue
        data = vocab.tokens[token]
        out += data if data is not None else vocab.special[token].encode()
    return out.decode("utf-8")


NAMES = ("a", "name", "x y", 'q"uote', "back\\slash", "ünï", "k1", "k2", "tab\t")
STRINGS = ("", "plain", 'with "quotes"', "back\\slash", "naïve", "日本", "line\nbreak", "🙂")


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.choice(
        ["str", "int", "float", "bool", "null", "list", "obj"][: 5 if depth > 1 else 7]
    )
    if kind == "str":
        return rng.choice(STRINGS)
    if kind == "int":
        return rng.randint(-1000, 1000)
    if kind == "float":
        return round(rng.uniform(-100, 100), 2)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 2))]
    return {rng.choice(NAMES): _value(rng, depth + 1) for _ in range(rng.randint(0, 2))}


def bounded_number(rng: random.Random) -> dict:
    """An integer or number with some of minimum/maximum/exclusive* (the range not empty)."""
    kind = rng.choice(["integer", "number"])
    low: float = rng.randint(-200, 200)
    high: float = low + rng.randint(2, 300)  # an integer strictly inside either way
    if kind == "number" and rng.random() < 0.5:
        low, high = low / 10, low / 10 + rng.randint(1, 300) / 100
    schema: dict = {"type": kind}
    if rng.random() < 0.8:
        schema["exclusiveMinimum" if rng.random() < 0.3 else "minimum"] = low
    if rng.random() < 0.8:
        schema["exclusiveMaximum" if rng.random() < 0.3 else "maximum"] = high
    return schema


def random_schema(rng: random.Random, depth: int = 0) -> dict:
    """A random schema from the supported subset."""
    leaf = depth >= 3
    kinds = ["string", "integer", "number", "boolean", "null", "enum", "const", "strlen"]
    kinds += ["bounded", "bounded"]
    if not leaf:
        kinds += ["object", "object", "array", "anyOf", "typelist", "nullable", "any"]
    kind = rng.choice(kinds)
    if depth == 0:  # mostly containers at the root, where the interesting nesting happens
        kind = rng.choice(["object"] * 6 + ["array"] * 2 + [kind] * 2)
    if kind in ("string", "integer", "number", "boolean", "null"):
        return {"type": kind}
    if kind == "bounded":
        return bounded_number(rng)
    if kind == "strlen":
        low = rng.randint(0, 3)
        return {"type": "string", "minLength": low, "maxLength": low + rng.randint(0, 4)}
    if kind == "enum":
        values = []
        for _ in range(rng.randint(1, 4)):
            value = _value(rng)
            if value not in values:
                values.append(value)
        return {"enum": values}
    if kind == "const":
        return {"const": _value(rng)}
    if kind == "any":
        return {}
    if kind == "typelist":
        return {"type": rng.sample(["string", "integer", "boolean", "null", "number"], 2)}
    if kind == "nullable":
        return {"type": "string", "nullable": True}
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1) for _ in range(rng.randint(2, 3))]}
    if kind == "array":
        low = rng.randint(0, 2)
        schema: dict = {"type": "array", "items": random_schema(rng, depth + 1)}
        if rng.random() < 0.5:
            schema["minItems"] = low
            schema["maxItems"] = low + rng.randint(0, 3)
        return schema
    names = rng.sample(NAMES, rng.randint(2 if depth == 0 else 0, 5 if depth == 0 else 3))
    schema = {"type": "object", "properties": {n: random_schema(rng, depth + 1) for n in names}}
    schema["required"] = [n for n in names if rng.random() < 0.5]
    extra = rng.random()
    if extra < 0.2:
        schema["additionalProperties"] = True
    elif extra < 0.3:
        schema["additionalProperties"] = random_schema(rng, depth + 1)
    return schema


def standard_schema(schema: object) -> object:
    """The schema as plain JSON Schema for the validator: OpenAPI's ``nullable`` rewritten."""
    if isinstance(schema, list):
        return [standard_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: standard_schema(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


def grammar_accepts(node: object, text: str) -> bool:
    """Does the grammar of ``node`` take ``text``'s bytes, then the end?"""
    grammar = Grammar(node)  # type: ignore[arg-type]
    sid = grammar.intern(grammar.initial)
    for byte in text.encode():
        sid = grammar.next(sid, byte)
        if sid == DEAD:
            return False
    return grammar.accepts_end(sid)


def automaton_accepts(automaton: RegexAutomaton, text: str) -> bool:
    """Whether ``automaton`` accepts the whole of ``text``, stepped a code point at a time."""
    states = automaton.start
    for char in text:
        states = automaton.step(states, ord(char))
        if not states:
            return False
    return automaton.accepts(states)
