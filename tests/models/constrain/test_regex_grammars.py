"""Regexes inside grammars: SGLang's ``regex`` as the whole output, JSON Schema ``pattern`` and
``format`` on strings. Random walks over allowed tokens are judged by ``re`` and ``jsonschema``
(with its FormatChecker); strings hypothesis draws are accepted through every JSON spelling;
the fast masks equal the slow reference ones."""

from __future__ import annotations

import datetime
import ipaddress
import json
import random
import re
import uuid

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.grammar import END, Grammar, advance, initial_state
from ember.models.constrain.masks import compute_mask, reference_mask
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.session import (
    ConstrainedDecoder,
    ConstraintSpec,
    GrammarCache,
    build_root,
)
from ember.models.constrain.tool_grammars import ToolSignature
from tests.models.constrain.fixtures import detokenize, sample_tokens, small_vocab

VOCAB = small_vocab()
TEXT_PATTERNS = [
    r"(yes|no)",
    r"[A-Z][a-z]{1,6}( [A-Z][a-z]{1,6})?",
    r"\d{3}-\d{4}",
    r"[^\n]{0,12}\.",
    r"(日本|café|🙂){1,3}!",
    r"[\w.]+@[a-z]+\.(com|org)",
    r"-?(0|[1-9]\d{0,4})(\.\d{1,3})?",
    r"\{\"a\": \d\}",
]
JSON_PATTERNS = [
    r"^\d{4}-\d{2}-\d{2}$",
    r"^[a-z]+(-[a-z]+)*$",
    r"^[^\"\\]{1,5}$",
    r"^(\"|\\|/|\n|\t|é){1,4}$",
    r"^[\x00-\x1f]{1,2}$",
    r"^.{0,6}$",
    r"\d",
    r"^ab",
    r"^[\u00e0-\u00ff\u4e00-\u4e20]+$",
]


def accepts(node, text: str) -> bool:  # noqa: ANN001
    state = initial_state(node)
    for byte in text.encode():
        state = advance(state, byte)
        if not state:
            return False
    return () in advance(state, END)


def walk(spec: ConstraintSpec, seed: int) -> str:
    decoder = GrammarCache().decoder(spec, VOCAB)
    return detokenize(VOCAB, sample_tokens(decoder, random.Random(seed), closing=0.5))


@pytest.mark.parametrize("pattern", TEXT_PATTERNS)
def test_regex_output_random_walks_fullmatch(pattern: str) -> None:
    for seed in range(6):
        text = walk(ConstraintSpec(regex=pattern), seed)
        assert re.fullmatch(pattern, text, re.ASCII), text


@pytest.mark.parametrize("pattern", JSON_PATTERNS)
def test_pattern_strings_random_walks_match_the_decoded_value(pattern: str) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    schema["required"] = ["v"]
    for seed in range(6):
        value = json.loads(walk(ConstraintSpec(json="schema", schema=schema), seed))
        jsonschema.Draft202012Validator(schema).validate(value)  # re.search, as the spec says
        assert re.search(pattern, value["v"], re.ASCII), value


@pytest.mark.parametrize("pattern", JSON_PATTERNS)
def test_every_json_spelling_of_a_matching_string_is_accepted(pattern: str) -> None:
    node = compile_schema({"type": "string", "pattern": pattern})
    # Python's "$" also matches before a final newline; ECMA-262's (JSON Schema's) does not.
    python_pattern = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    strategy = st.from_regex(re.compile(python_pattern, re.ASCII))

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def check(value: str) -> None:
        spellings = [json.dumps(value, ensure_ascii=False)]
        if all(ord(c) <= 0xFFFF for c in value):  # surrogate-pair escapes are refused (JString)
            spellings.append(json.dumps(value))
        for text in spellings:
            assert accepts(node, text), text

    check()


def test_json_spellings_decide_nothing_about_the_value() -> None:
    node = compile_schema({"type": "string", "pattern": r"^a/b\"c$"})
    for text in ['"a/b\\"c"', '"a\\/b\\"c"', '"\\u0061/b\\u0022c"', '"\\u0061\\u002F\\u0062\\"c"']:
        assert accepts(node, text), text
    for text in ['"a/b"c"', '"a/bc"', '"\\ud800a/b\\"c"']:
        assert not accepts(node, text), text


def test_pattern_with_length_bounds_applies_both() -> None:
    node = compile_schema({"type": "string", "pattern": "^[a-z]*$", "minLength": 2, "maxLength": 3})
    assert [accepts(node, json.dumps(t)) for t in ("a", "ab", "abc", "abcd", "aB")] == [
        False,
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": r"é|\"", "maxLength": 4},
        {"type": "string", "pattern": r"^(ab)+$", "minLength": 5, "maxLength": 9},
        {"type": "string", "pattern": r"x", "minLength": 6},
    ],
)
def test_pattern_and_length_bounds_never_strand_the_walk(schema: dict) -> None:
    # A length bound checked apart from the pattern let a walk use up its room before the
    # pattern was met: a state with no allowed token (the engine then failed the request).
    for seed in range(12):
        value = json.loads(walk(ConstraintSpec(json="schema", schema=schema), seed))
        jsonschema.Draft202012Validator(schema).validate(value)


FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def _strict_format(fmt: str, value: str) -> bool:
    """Independent judges beyond jsonschema's checker (whose date-time/time checks need an
    optional package): the standard library's parsers."""
    if fmt == "date-time":
        return bool(datetime.datetime.fromisoformat(value)) and "T" in value
    if fmt == "time":
        return bool(datetime.time.fromisoformat(value))
    if fmt == "date":
        return bool(datetime.date.fromisoformat(value))
    if fmt == "uuid":
        return bool(uuid.UUID(value))
    if fmt == "ipv4":
        return bool(ipaddress.IPv4Address(value))
    if fmt == "ipv6":
        return bool(ipaddress.IPv6Address(value))
    return "@" in value


@pytest.mark.parametrize("fmt", ["date", "time", "date-time", "email", "uuid", "ipv4", "ipv6"])
def test_formats_random_walks_pass_the_format_checkers(fmt: str) -> None:
    schema = {"type": "array", "items": {"type": "string", "format": fmt}, "minItems": 1}
    schema["maxItems"] = 3
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    for seed in range(5):
        values = json.loads(walk(ConstraintSpec(json="schema", schema=schema), seed))
        validator.validate(values)
        for value in values:
            assert _strict_format(fmt, value), value


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", ["2024-02-29", "2023-12-31"], ["2023-02-29", "2024-13-01", "2024-04-31"]),
        ("ipv4", ["0.0.0.0", "255.10.1.9"], ["256.1.1.1", "01.1.1.1", "1.1.1"]),
        ("ipv6", ["::", "1::", "::1", "fe80::1:2", "1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:8:9", ":"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
        ("date-time", ["2024-06-01T12:30:00Z", "2024-06-01T23:59:59.5+02:00"], ["2024-06-01"]),
    ],
)
def test_formats_accept_and_refuse_known_values(fmt: str, good: list, bad: list) -> None:
    node = compile_schema({"type": "string", "format": fmt})
    assert all(accepts(node, json.dumps(v)) for v in good)
    assert not any(accepts(node, json.dumps(v)) for v in bad)


def test_unknown_format_stays_an_annotation() -> None:
    node = compile_schema({"type": "string", "format": "hostname-ish"})
    assert accepts(node, '"anything at all"')


def test_strict_schema_names_the_pattern_construct() -> None:
    with pytest.raises(InvalidRequestField) as caught:
        compile_schema(
            {"type": "object", "properties": {"a": {"type": "string", "pattern": r"(x)\1"}}},
            path="/response_format/json_schema/schema",
        )
    assert caught.value.field == "/response_format/json_schema/schema/properties/a/pattern"
    assert "backreference \\1 at offset 3" in str(caught.value)


def test_lenient_tool_schema_ignores_an_unsupported_pattern_and_enforces_a_supported_one() -> None:
    bad = compile_schema({"type": "string", "pattern": r"(?=x)"}, strict=False)
    assert accepts(bad, '"whatever"')
    good = compile_schema({"type": "string", "pattern": r"^\d+$"}, strict=False)
    assert accepts(good, '"12"') and not accepts(good, '"x"')


def test_kimi_tool_arguments_keep_their_patterns_and_no_marker_spelling() -> None:
    tool = ToolSignature(
        "lookup",
        {"type": "object", "properties": {"id": {"type": "string", "pattern": r"^[A-Z]{2}\d{3}$"}}},
    )
    spec = ConstraintSpec(tools=(tool,), tools_required=True, tool_format="kimi")
    for seed in range(4):
        text = walk(spec, seed)
        arguments = json.loads(text.split("<|tool_call_argument_begin|>")[1].split("<|")[0])
        assert re.fullmatch(r"[A-Z]{2}\d{3}", arguments.get("id", "AA000")), text


def _walk_states(grammar: Grammar, rng: random.Random, steps: int) -> list:
    decoder = ConstrainedDecoder(grammar, VOCAB)
    states = [decoder.state]
    for _ in range(steps):
        if decoder.is_finished:
            break
        decoder.advance(rng.choice(decoder.allowed_token_mask().token_ids()))
        states.append(decoder.state)
    return states


@pytest.mark.parametrize(
    "spec",
    [
        ConstraintSpec(regex=r"(日本|café|[a-z]){1,8}\d?"),
        ConstraintSpec(regex=r"[^x]{0,20}"),
        ConstraintSpec(json="schema", schema={"type": "string", "pattern": r"^[\w é\"]{0,9}$"}),
        ConstraintSpec(json="schema", schema={"type": "string", "format": "date-time"}),
    ],
)
def test_fast_masks_equal_reference_for_regex_grammars(spec: ConstraintSpec) -> None:
    rng = random.Random(spec.key())
    grammar = Grammar(build_root(spec, VOCAB.special_ids))
    for state in _walk_states(grammar, rng, 30)[::2]:
        assert compute_mask(grammar, VOCAB, grammar.intern(state)) == reference_mask(state, VOCAB)


def test_regex_after_a_reasoning_block() -> None:
    spec = ConstraintSpec(regex=r"(yes|no)", reasoning="inside")
    for seed in range(3):
        text = walk(spec, seed)
        # Up to two whitespace bytes may follow </think> (the output parser trims them).
        assert re.fullmatch(r"(?s).*</think>\s{0,2}(yes|no)", text), text
