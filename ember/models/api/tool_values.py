"""Turning the pieces of a model's tool-call text into OpenAI values.

GLM writes string arguments raw and every other value as JSON (its chat template renders
``v | tojson if v is not string else v``), so a value's type has to come from the tool's
parameters schema: ``42`` is the string ``"42"`` for a string parameter and the number 42 for
an integer one. Kimi names each call ``functions.NAME:INDEX``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

from ember.models.constrain.tool_root import (
    MAX_HOPS,
    ValueForm,
    follow,
    lenient_arguments_object,
    value_form,
    value_kinds,
)

_COMPACT: dict = {"ensure_ascii": False, "separators": (",", ":")}
_KIMI_ID = re.compile(r"^(?:functions\.)?(?P<name>[^\s:]+):(?P<index>\d+)$")


def schema_types(schema: object, root: object = None, depth: int = 0) -> set[str] | None:
    """The JSON types a schema admits (``integer`` implies ``number``), or None if unknown.
    Each level is followed as the grammar follows it (``tool_root.follow``: ``$ref`` and
    ``allOf`` of one schema, up to ``MAX_HOPS``), so both agree on what a value is."""
    root = schema if root is None else root
    schema = follow(schema, root)
    if not isinstance(schema, Mapping) or depth > MAX_HOPS:
        return None
    found: set[str] = set(value_kinds(schema))
    declared = schema.get("type")
    for key in ("enum", "const"):
        values = [schema[key]] if key == "const" and key in schema else schema.get(key)
        if isinstance(values, list) and not declared:
            found.update(_json_type(v) for v in values)
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            sub = schema_types(branch, root, depth + 1)
            if sub is None:
                return None
            found |= sub
    if not found and ("properties" in schema):
        found.add("object")
    if "integer" in found:
        found.add("number")
    return found or None


def glm_value_form(schema: object, root: object = None) -> ValueForm | None:
    """How the grammar has GLM write a value of ``schema`` (``tool_root.value_form``), or
    None where its ``$ref``s lead nowhere."""
    if schema is None:
        return None
    target = follow(schema, schema if root is None else root)
    return None if target is None else value_form(target)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of a float's range")
    return value


def convert_glm_value(raw: str, schema: object, root: object = None) -> object:
    """One ``<arg_value>`` body as the value the schema expects; ``root``: the tool's whole
    parameters, which the schema's ``$ref``s point into."""
    # Raw where the grammar writes raw text: the string "12345" stays a string.
    if glm_value_form(schema, root) == "raw":
        return raw
    types = schema_types(schema, root)
    try:
        # Strict JSON: NaN, Infinity or 1e999 would come back out as NaN / Infinity in the
        # arguments string, which JSON.parse (and OpenAI's clients) refuse; they stay text.
        parsed = json.loads(raw, parse_constant=_not_json, parse_float=_finite_float)
    except ValueError:
        return raw
    if types is None:
        return parsed
    kind = _json_type(parsed)
    if kind in types or (kind == "number" and "integer" in types and float(parsed).is_integer()):
        return parsed
    if "string" in types:
        return raw
    return parsed


def parameter_schema(parameters: Mapping | None, key: str) -> object:
    """The schema of the argument ``key`` (through a root ``$ref``: pydantic's parameters)."""
    arguments = lenient_arguments_object(parameters)
    if arguments is None:
        return None
    properties = arguments.get("properties")
    return properties.get(key) if isinstance(properties, Mapping) else None


def value_types(parameters: Mapping | None, key: str) -> set[str] | None:
    """The JSON types the argument ``key`` admits, its ``$ref``s followed in ``parameters``."""
    return schema_types(parameter_schema(parameters, key), parameters)


def parse_kimi_call_id(raw: str, tool_names: Sequence[str]) -> str | None:
    """The function name in a Kimi call id (``functions.get_weather:0`` or ``get_weather:0``);
    a bare counter (``0``) names the only tool when exactly one is declared; else None."""
    text = raw.strip()
    match = _KIMI_ID.match(text)
    if match:
        return match.group("name")
    if text.isdigit() and len(tool_names) == 1:
        return tool_names[0]
    return None


def glm_arguments_json(pairs: Sequence[tuple[str, object]]) -> list[str]:
    """The argument string's pieces, one per pair (``{"a":1`` then ``,"b":2``), so that
    streaming sends exactly what the final message holds; the closing brace comes last."""
    pieces = []
    for i, (key, value) in enumerate(pairs):
        body = json.dumps(key, ensure_ascii=False) + ":" + json.dumps(value, **_COMPACT)
        pieces.append(("{" if i == 0 else ",") + body)
    return pieces
