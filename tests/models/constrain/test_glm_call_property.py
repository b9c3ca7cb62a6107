"""Property: every GLM call the grammar allows parses to arguments its schema accepts.

Random tool schemas (type lists beside bounds, lengths and enums, ``$ref``s into ``$defs``,
``anyOf`` of strings and integers, nested objects and arrays), a random walk over the tokens the
grammar allows, the output parser, then ``jsonschema`` as the independent judge. Each run draws a
fresh seed (printed on failure; ``EMBER_GLM_PROPERTY_SEED`` replays one), so runs over time cover
more schemas than one fixed sample would (review32)."""

from __future__ import annotations

import json
import os
import random

import jsonschema

from ember.models.api.output_parser import parse_output
from ember.models.constrain.json_values import type_allows
from ember.models.constrain.session import ConstraintSpec, GrammarCache
from ember.models.constrain.tool_grammars import ToolSignature
from tests.models.constrain.fixtures import (
    WalkDidNotFinish,
    detokenize,
    random_schema,
    sample_tokens,
    small_vocab,
    standard_schema,
)

VOCAB = small_vocab()
# Sampling a walk costs most of the time (a token mask per step): 60 calls take about 5 s.
CASES = 60
WALKS = 3
DEFS = {
    "S": {"type": "string", "maxLength": 4},
    "I": {"type": "integer", "minimum": 5, "maximum": 9},
    "SI": {"type": ["string", "integer"]},
    "E": {"enum": ["1", 1, True, "true", None]},
}
MEMBERS = ["1", 1, "true", True, "x", 2.5, None, "", "null", "2.5"]


def _value_schema(rng: random.Random) -> object:
    kind = rng.randrange(12)
    if kind == 0:
        return {"$ref": "#/$defs/" + rng.choice(list(DEFS))}
    if kind == 1:
        return {"allOf": [{"$ref": "#/$defs/" + rng.choice(list(DEFS))}]}
    if kind == 2:
        types = rng.sample(["string", "integer", "number", "boolean", "null"], rng.randint(2, 3))
        schema: dict = {"type": types}
        if rng.random() < 0.5:
            schema["minimum"], schema["maximum"] = 5, 50
        if rng.random() < 0.5:
            schema["maxLength"] = 3
        if rng.random() < 0.3:
            schema["pattern"] = rng.choice(["^1", "^[a-z]*$", '^"', "5$"])
        return schema
    if kind == 3:
        types = rng.choice([["string", "integer"], ["integer", "string"], ["string", "boolean"]])
        if rng.random() < 0.2:
            types = [*types, "null"]
        # Members of the listed types only (the JSON path refuses a schema with none).
        members = [m for m in rng.sample(MEMBERS, 4) if type_allows(set(types), m)] or ["x"]
        if rng.random() < 0.2:
            return {"type": types, "const": members[0]}
        return {"type": types, "enum": members}
    if kind == 4:
        return {"type": "string", "nullable": True, "maxLength": rng.randint(0, 4)}
    if kind == 5:
        return {
            "anyOf": [
                {"type": "string", "maxLength": 2},
                {"type": "integer"},
                {"$ref": "#/$defs/I"},
            ]
        }
    return random_schema(rng, 1)


def _finished_walk(spec: ConstraintSpec, rng: random.Random) -> list[int]:
    """The tokens of a walk that finished: a walk can outlast its step bound where the grammar's
    only ending is rare (a raw value that must end in "5"), so up to WALKS are drawn; a grammar
    with no reachable end fails all of them."""
    for attempt in range(WALKS):
        decoder = GrammarCache().decoder(spec, VOCAB)
        try:
            return sample_tokens(decoder, rng)
        except WalkDidNotFinish:
            if attempt == WALKS - 1:
                raise
    raise AssertionError("unreachable")


def _check_one(rng: random.Random) -> str | None:
    """A random tool, one sampled call, and what is wrong with it (None if nothing)."""
    properties = {f"p{i}": _value_schema(rng) for i in range(rng.randint(1, 3))}
    parameters = {
        "type": "object",
        "$defs": DEFS,
        "properties": properties,
        "required": list(properties),
    }
    strict = rng.random() < 0.5
    spec = ConstraintSpec(
        tools=(ToolSignature("f", parameters, strict),),
        tools_required=True,
        tool_format=rng.choice(["glm45", "glm47"]),
        parallel_tool_calls=rng.random() < 0.25,  # up to 16 calls: fewer, shorter walks
    )
    text = detokenize(VOCAB, _finished_walk(spec, rng))
    calls = parse_output(text, spec.tool_format, tools={"f": parameters}).tool_calls
    if not calls:
        return f"no call parsed from {text!r}"
    validator = jsonschema.Draft202012Validator(standard_schema(parameters))
    for call in calls:
        arguments = json.loads(call.arguments)
        error = next(iter(validator.iter_errors(arguments)), None)
        if error is not None:
            return f"{error.message} in {arguments!r}\n  text {text!r}\n  schema {parameters!r}"
    return None


def test_every_call_the_grammar_allows_parses_to_valid_arguments() -> None:
    seed = int(os.environ.get("EMBER_GLM_PROPERTY_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    for case in range(CASES):
        try:
            problem = _check_one(rng)
        except AssertionError as error:  # a walk's own failure: name the seed to replay it
            raise AssertionError(f"seed {seed}, case {case}: {error}") from error
        assert problem is None, f"seed {seed}, case {case}: {problem}"
