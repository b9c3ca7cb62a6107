"""Request schemas are compiled once per distinct schema that compiles (``schema_check.py``),
and every answer is the one compiling each time (the reference) gives: fresh random schemas,
valid and not, strict and lenient, in any order and repeated."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain import schema_check
from ember.models.constrain.automata import Automata
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.schema_check import KnownSchemas


def _outcome(check: Any, schema: object, path: str, strict: bool) -> str:
    try:
        check(schema, path=path, strict=strict)
    except InvalidRequestField as exc:
        return str(exc)
    return "ok"


def _reference(schema: object, *, path: str, strict: bool) -> None:
    compile_schema(schema, path=path, strict=strict)


def _random_schema(rng: random.Random, depth: int = 0) -> object:
    kind = rng.choice(["string", "integer", "object", "enum", "odd", "array"])
    if kind == "string":
        return {"type": "string", "maxLength": rng.randint(0, 9)}
    if kind == "integer":  # an empty range is refused when strict only
        return {"type": "integer", "minimum": rng.randint(0, 5), "maximum": rng.randint(0, 5)}
    if kind == "enum":  # an empty enum is refused either way
        return {"enum": [rng.randint(0, 3) for _ in range(rng.randint(0, 2))]}
    if kind == "odd":  # keywords ember cannot enforce: refused when strict only
        return {"type": "object", rng.choice(["patternProperties", "not"]): {}}
    if kind == "array" or depth > 1:
        return {"type": "array", "items": {"type": "boolean"}}
    names = rng.sample("abcd", rng.randint(0, 3))
    properties = {name: _random_schema(rng, depth + 1) for name in names}
    required = names[: rng.randint(0, len(names))] + (["zz"] if rng.random() < 0.2 else [])
    return {"type": "object", "properties": properties, "required": required}


@pytest.mark.parametrize("seed", range(5))
def test_every_answer_is_the_reference_answer(seed: int) -> None:
    rng = random.Random(seed)
    pool = [_random_schema(rng) for _ in range(12)]
    known = KnownSchemas(size=4)  # small: schemas are forgotten and compiled again as well
    outcomes = set()
    for index in range(120):
        schema = rng.choice(pool)
        strict = rng.random() < 0.5
        path = f"/request{index}/schema"
        expected = _outcome(_reference, schema, path, strict)
        assert _outcome(known.check, schema, path, strict) == expected
        outcomes.add(expected == "ok")
    assert outcomes == {True, False}  # both kinds of answer were met


def test_a_schema_that_compiled_is_not_compiled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []

    def counting(schema: object, *, path: str, strict: bool, automata: Automata) -> object:
        compiled.append(path)
        return compile_schema(schema, path=path, strict=strict, automata=automata)

    monkeypatch.setattr(schema_check, "compile_schema", counting)
    known = KnownSchemas(size=2)
    valid = {"type": "object", "properties": {"a": {"type": "string"}}}
    for index in range(3):
        known.check(dict(valid), path=f"/{index}", strict=True)  # an equal schema, another dict
    assert compiled == ["/0"]
    known.check(valid, path="/lenient", strict=False)  # strictness is part of the identity
    assert compiled == ["/0", "/lenient"]
    bad = {"type": "object", "not": {}}
    for path in ("/x", "/y"):  # an invalid one every time, naming this request's field
        with pytest.raises(InvalidRequestField, match=f"'{path}/not'"):
            known.check(bad, path=path, strict=True)
    assert compiled == ["/0", "/lenient", "/x", "/y"]
    known.check({"type": "string"}, path="/s", strict=True)  # a third valid one: /0's goes
    known.check(valid, path="/again", strict=True)
    assert compiled[-1] == "/again"
