"""Numeric bounds are enforced by construction: the grammar for a bounded ``integer`` or
``number`` accepts exactly the JSON spellings (no exponent, no ``-0``, at most 15 digits) whose
value the client's own check (Python comparing the parsed value with the bound, as jsonschema and
Pydantic do) finds in range. Random ranges and random candidates, fresh each run; a failure
names the seed: replay it with ``EMBER_FUZZ_SEED=N``."""

from __future__ import annotations

import json
import os
import random
import re

import pytest
from pydantic import BaseModel, Field

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.grammar import END, advance, initial_state
from ember.models.constrain.nodes import Node
from ember.models.constrain.schema import compile_schema

SEED = (
    int(os.environ["EMBER_FUZZ_SEED"])
    if os.environ.get("EMBER_FUZZ_SEED")
    else random.SystemRandom().randrange(2**32)
)
INTEGER_TEXT = re.compile(r"-?(0|[1-9]\d*)")
NUMBER_TEXT = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?")


def accepts(node: Node, text: str) -> bool:
    state = initial_state(node)
    for byte in text.encode():
        state = advance(state, byte)
        if not state:
            return False
    return () in advance(state, END)


def in_bounds(value: float, schema: dict) -> bool:
    """What a validator checks, on the value ``json.loads`` gives (draft 2020-12 keywords)."""
    checks = {
        "minimum": lambda b: value >= b,
        "maximum": lambda b: value <= b,
        "exclusiveMinimum": lambda b: value > b,
        "exclusiveMaximum": lambda b: value < b,
    }
    return all(check(schema[k]) for k, check in checks.items() if k in schema)


def expected(text: str, schema: dict) -> bool:
    syntax = INTEGER_TEXT if schema["type"] == "integer" else NUMBER_TEXT
    if not syntax.fullmatch(text) or re.fullmatch(r"-0(\.0+)?", text):
        return False
    if sum(c.isdigit() for c in text) > 15:
        return False
    return in_bounds(json.loads(text), schema)


def _bound(rng: random.Random, kind: str, scale: int) -> float | int:
    value = rng.randint(-scale, scale)
    if kind == "number" and rng.random() < 0.6:
        return round(value / 10 ** rng.randint(1, 3), rng.randint(1, 3))
    return value


def random_bounded(rng: random.Random, kind: str) -> dict:
    scale = rng.choice([9, 150, 5000, 10**7])
    schema: dict = {"type": kind}
    ends = rng.choice(["both", "both", "low", "high"])
    a, b = sorted([_bound(rng, kind, scale), _bound(rng, kind, scale)])
    if ends != "high":
        schema["exclusiveMinimum" if rng.random() < 0.3 else "minimum"] = a
    if ends != "low":
        schema["exclusiveMaximum" if rng.random() < 0.3 else "maximum"] = b
    if rng.random() < 0.1:  # two lower bounds: the tighter one counts
        schema["minimum"] = _bound(rng, kind, scale)
    return schema


def candidates(rng: random.Random, schema: dict) -> set[str]:
    """Every integer near each end and between them when few, the ends' own spellings nudged,
    numbers with fractions around them, exponents, and junk."""
    ends = [v for k, v in schema.items() if k != "type"]
    out: set[str] = set()
    for end in ends:
        centre = int(end)
        out |= {str(centre + d) for d in range(-25, 26)}
        text = repr(end)
        out |= {text, text + "0", text + "1", text + "9", "-" + text.lstrip("-")}
        for _ in range(40):
            whole = centre + rng.randint(-3, 3)
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6)))
            out.add(f"{whole}.{digits}")
    if len(ends) == 2 and abs(ends[1] - ends[0]) < 400:
        out |= {str(v) for v in range(int(min(ends)) - 5, int(max(ends)) + 6)}
    for _ in range(200):
        out.add("".join(rng.choice("-0123456789.eE+") for _ in range(rng.randint(0, 8))))
    out |= {"1e2", "-0", "-0.0", "00", "01", "0.", ".5", str(10**15), str(10**14), "1" * 16}
    return out


@pytest.mark.parametrize("kind", ["integer", "number"])
@pytest.mark.parametrize("batch", range(4))
def test_bounded_grammar_accepts_exactly_the_in_range_values(kind: str, batch: int) -> None:
    rng = random.Random(f"{SEED}-{kind}-{batch}")
    for _ in range(15):
        schema = random_bounded(rng, kind)
        try:
            node = compile_schema(schema)
        except InvalidRequestField:
            # Only a range without a value ember generates may be refused.
            assert not any(expected(c, schema) for c in candidates(rng, schema)), (SEED, schema)
            continue
        for text in candidates(rng, schema):
            assert accepts(node, text) == expected(text, schema), (SEED, schema, text)


def test_open_ended_integer_takes_every_longer_number() -> None:
    node = compile_schema({"type": "integer", "minimum": 18})
    assert [accepts(node, t) for t in ("17", "18", "99", "100", "1000000", "018")] == [
        False,
        True,
        True,
        True,
        True,
        False,
    ]
    assert accepts(node, "9" * 15) and not accepts(node, "1" * 16)


def test_number_at_an_integer_end_takes_only_zero_fractions() -> None:
    node = compile_schema({"type": "number", "minimum": 0, "maximum": 120})
    for text, ok in [("119.99", True), ("120", True), ("120.000", True), ("120.001", False)]:
        assert accepts(node, text) is ok, text
    for text in ("0", "0.0", "-0", "-0.5", "1e2", "1.5E1"):
        assert accepts(node, text) is (text in ("0", "0.0")), text


def test_exclusive_decimal_bounds_hold_after_float_parsing() -> None:
    node = compile_schema({"type": "number", "exclusiveMinimum": 0.1, "exclusiveMaximum": 0.3})
    assert not accepts(node, "0.1") and not accepts(node, "0.10")
    assert accepts(node, "0.10000000000001")  # 15 digits: a float above 0.1
    assert not accepts(node, "0.1000000000000001")  # 17 digits: would parse as 0.1
    assert accepts(node, "0.29999") and not accepts(node, "0.3")


def test_draft4_boolean_exclusive_bounds() -> None:
    node = compile_schema({"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 3})
    assert [accepts(node, t) for t in "0123"] == [False, True, True, True]


def test_bounds_filter_enum_values_and_imply_a_number() -> None:
    node = compile_schema({"enum": [1, 50, 500, "x"], "maximum": 100})
    assert accepts(node, "50") and accepts(node, '"x"') and not accepts(node, "500")
    node = compile_schema({"minimum": 2.5})
    assert accepts(node, "2.5") and accepts(node, "3") and not accepts(node, "2")


def test_lenient_mode_enforces_bounds_and_ignores_broken_ones() -> None:
    node = compile_schema({"type": "integer", "minimum": 0, "maximum": 9}, strict=False)
    assert accepts(node, "7") and not accepts(node, "-42")
    # A malformed bound is ignored; a range holding no integer is not (review33: ignoring it
    # let any number through where JSON Schema allows none).
    node = compile_schema({"type": "integer", "minimum": "9", "maximum": 0}, strict=False)
    assert accepts(node, "-42")
    for schema in (
        {"type": "integer", "minimum": 9, "maximum": 0},
        {"type": "integer", "minimum": 0.2, "maximum": 0.8},
    ):
        with pytest.raises(InvalidRequestField, match="/(minimum|maximum)'"):
            compile_schema(schema, strict=False)


class Person(BaseModel):
    age: int = Field(ge=0, le=120)
    height: float = Field(gt=0, lt=2.5)


def test_pydantic_field_bounds_compile_and_hold() -> None:
    node = compile_schema(Person.model_json_schema())
    assert accepts(node, '{"age":120,"height":1.85}')
    assert not accepts(node, '{"age":121,"height":1.85}')
    assert not accepts(node, '{"age":30,"height":0}')
    assert not accepts(node, '{"age":30,"height":2.5}')


@pytest.mark.parametrize(
    ("schema", "field", "expected_text"),
    [
        ({"type": "integer", "minimum": 5, "maximum": 1}, "/s/maximum", "a range some value"),
        ({"type": "number", "minimum": 1, "exclusiveMaximum": 1}, "/s/exclusiveMaximum", "range"),
        ({"type": "integer", "minimum": "5"}, "/s/minimum", "expected a number, got 5"),
        ({"type": "integer", "maximum": True}, "/s/maximum", "expected a number"),
        ({"type": "integer", "minimum": 0.2, "maximum": 0.8}, "/s/minimum", "holds an integer"),
        (
            {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1e-16},
            "/s/exclusiveMinimum",
            "at most 15 digits",
        ),
        ({"type": "integer", "exclusiveMinimum": True}, "/s/exclusiveMinimum", "beside 'minimum'"),
        ({"anyOf": [{"type": "integer"}], "minimum": 0}, "/s/minimum", "move it into each"),
        ({"type": "number", "multipleOf": 2}, "/s/multipleOf", "keyword ember can enforce"),
    ],
)
def test_broken_or_unenforceable_bounds_name_the_keyword(
    schema: dict, field: str, expected_text: str
) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        compile_schema(schema, path="/s")
    assert caught.value.field == field
    assert expected_text in str(caught.value)
