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

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata
from ember.models.constrain.grammar import accepts
from ember.models.constrain.json_values import json_type_of, type_allows
from ember.models.constrain.nodes import Node
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.tool_grammars import GLM_MARKERS
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
    """The JSON types a schema admits, or None if unknown.
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
            # JSON Schema's type of each member, the one typer the grammar uses too: 1.0 is
            # an integer, so raw text 1.5 is not taken for a member of enum [1.0, "1.5"].
            found.update(json_type_of(v) for v in values)
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or []:
            sub = schema_types(branch, root, depth + 1)
            if sub is None:
                return None
            found |= sub
    if not found and ("properties" in schema):
        found.add("object")
    return found or None


def glm_value_form(schema: object, root: object = None) -> ValueForm | None:
    """How the grammar has GLM write a value of ``schema`` (``tool_root.value_form``), or
    None where its ``$ref``s lead nowhere."""
    if schema is None:
        return None
    target = follow(schema, schema if root is None else root)
    return None if target is None else value_form(target)


def _not_json(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of a float's range")
    return value


def _strict_json(raw: str) -> object:
    """``raw`` as JSON, or ``ValueError``. Strict: NaN, Infinity or 1e999 would come back out
    as NaN / Infinity in the arguments string, which JSON.parse (and OpenAI's clients) refuse;
    they stay text."""
    return json.loads(raw, parse_constant=_not_json, parse_float=_finite_float)


class JsonBranches:
    """The compiled JSON branch of each "either" value (a string among other types), by
    schema object: the grammar's JSON branch, compiled as the grammar compiles it (lenient:
    where the tool is strict, that is the same grammar). One per request, shared by its
    choices (n > 1) and their parallel calls: compiling takes 2-35 ms on the event loop (a
    bounded number's regex, a pattern), and every choice repeats the same values (review33 #2).
    The branches of every tool share one automaton budget, as the grammar's values do
    (tool_grammars._Root, one per request): a pattern or bound repeated by its values is built
    once, and the parser builds no more than the grammar could."""

    def __init__(self) -> None:
        self._nodes: dict[int, tuple[object, Node | None]] = {}
        self._automata = Automata()

    def takes(self, raw: str, schema: object, root: object) -> bool | None:
        """Whether the JSON branch takes ``raw``; None where the schema does not compile (no
        grammar constrained the value)."""
        known = self._nodes.get(id(schema))
        if known is None or known[0] is not schema:
            known = (schema, self._compile(schema, root))  # the schema kept alive: its id stays
            self._nodes[id(schema)] = known
        node = known[1]
        return None if node is None else accepts(node, raw.encode())

    def _compile(self, schema: object, root: object) -> Node | None:
        try:
            return compile_schema(
                follow(schema, root),
                forbidden=GLM_MARKERS,
                within=(root, ""),
                strict=False,
                automata=self._automata,
            )
        except InvalidRequestField:
            return None


def convert_glm_value(
    raw: str, schema: object, root: object = None, branches: JsonBranches | None = None
) -> object:
    """One ``<arg_value>`` body as the value the schema expects; ``root``: the tool's whole
    parameters, which the schema's ``$ref``s point into; ``branches``: the parser's memo."""
    root = schema if root is None else root
    form = glm_value_form(schema, root)
    # Raw where the grammar writes raw text: the string "12345" stays a string.
    if form == "raw":
        return raw
    if form == "either":
        # A string among other types: JSON only where the grammar's JSON branch took the text,
        # else the string its raw branch took (1.5 for an integer-or-string is "1.5", and an
        # integer below the minimum, or a raw true where only the string "true" is listed,
        # stays text), so every value the grammar allows parses to one the schema accepts.
        taken = (branches or JsonBranches()).takes(raw, schema, root)
        if taken is not None:
            try:
                return _strict_json(raw) if taken else raw
            except ValueError:
                return raw
    try:
        parsed = _strict_json(raw)
    except ValueError:
        return raw
    # JSON where the schema admits no string; else (an either value whose schema does not
    # compile: no grammar read it) typed by the JSON types the schema lists, and a string where
    # the text parses as none of them (an integer is a number, never the reverse).
    types = schema_types(schema, root)
    if types is None or type_allows(types, parsed) or "string" not in types:
        return parsed
    return raw


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
