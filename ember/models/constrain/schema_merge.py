"""Compiling ``anyOf``/``oneOf``/``allOf``; lenient, the keywords beside one hold in every
alternative.

``{"properties": {...}, "anyOf": [{"required": ["id"]}, {"required": ["email"]}]}`` means "these
properties, with ``id`` or ``email`` present": JSON Schema intersects a combinator with its
siblings. Strict mode refuses that; lenient (tool parameters, ``strict: false``) compiles each
alternative intersected with the siblings (schema_intersect.py: the same set of values for the
keywords ember enforces, but for two different ``pattern``s, of which the alternative's holds).
Lenient never refuses a valid schema: an alternative that contradicts the siblings
(``{"enum": ["a"], "anyOf": [{"type": "integer"}, ...]}``) matches no value and is left out, and
when none is left (or an alternative is a ``$ref``, which is not merged) the combinator is
ignored, a looser grammar.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import AutomatonBudgetExceeded
from ember.models.constrain.nodes import Choice, Node
from ember.models.constrain.schema_intersect import EMPTY, intersect
from ember.models.constrain.schema_keywords import pointer_part

# Compiles one subschema at its path in the request.
CompilePart = Callable[[object, str], Node]


def compile_combinator(
    schema: Mapping,
    combinator: str,
    path: str,
    *,
    strict: bool,
    shaping: tuple[str, ...],
    compile_part: CompilePart,
) -> Node:
    """The node of ``schema``, whose ``combinator`` is ``anyOf``, ``oneOf`` (as ``anyOf``) or
    ``allOf`` of one schema; ``shaping``: the keywords that make a sibling an intersection."""
    branches = schema[combinator]
    where = f"{path}/{combinator}"
    if not isinstance(branches, list) or not branches:
        shown = branches if isinstance(branches, str) else json.dumps(branches)[:80]
        raise InvalidRequestField(where, "a non-empty array of schemas", shown)
    if combinator == "allOf" and len(branches) != 1:
        if strict:
            raise InvalidRequestField(
                where, "allOf with a single schema", f"{len(branches)} schemas", "unsupported_value"
            )
        branches = branches[:1]
    siblings = [k for k in shaping if k in schema and k != combinator]
    if siblings and strict:
        raise InvalidRequestField(
            f"{path}/{siblings[0]}",
            f"{combinator} without sibling '{siblings[0]}' (move it into each alternative)",
            f"'{siblings[0]}' beside {combinator}",
            "unsupported_value",
        )
    if not siblings:
        nodes = [compile_part(b, f"{where}/{i}") for i, b in enumerate(branches)]
        return nodes[0] if len(nodes) == 1 else Choice(nodes)
    rest = {k: v for k, v in schema.items() if k != combinator}
    merged = merge_siblings(schema, combinator, branches)
    if merged is None:
        # An alternative that is a $ref cannot take the siblings: only the combinator is
        # ignored (a looser grammar, never one refusing valid arguments).
        return compile_part(rest, path)
    # The siblings' own subschemas first, at their paths in the request: their errors are
    # named there, and the compiler shares their nodes among the merged alternatives (each
    # copy counted once, so nested merges grow linearly, not as branches ** depth).
    for key, part in _sibling_parts(schema):
        compile_part(part, f"{path}/{key}")
    nodes = []
    for i, (own, both) in enumerate(zip(branches, merged, strict=True)):
        try:
            if both is EMPTY:
                raise InvalidRequestField(f"{where}/{i}", "an alternative", "no value")
            nodes.append(compile_part(both, f"{where}/{i}"))
        except AutomatonBudgetExceeded:
            raise  # not a contradiction: the schema as a whole costs too much
        except InvalidRequestField:
            # The alternative's own error is the request's, named where it is; otherwise it
            # contradicts the siblings, no value matches both, and it is left out.
            compile_part(own, f"{where}/{i}")
    if not nodes:
        return compile_part(rest, path)
    return nodes[0] if len(nodes) == 1 else Choice(nodes)


def _sibling_parts(schema: Mapping) -> list[tuple[str, object]]:
    """The subschemas among the keywords beside a combinator, with their pointer suffixes."""
    parts: list[tuple[str, object]] = []
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            parts.append((f"properties/{pointer_part(name)}", sub))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            parts.append((key, schema[key]))
    return parts


def merge_siblings(schema: Mapping, combinator: str, branches: list) -> list | None:
    """Each alternative intersected with the keywords beside ``combinator`` (EMPTY where none
    of its values fits them), or None when one cannot be merged (a ``$ref``, not a schema)."""
    base = {k: v for k, v in schema.items() if k != combinator}
    merged = []
    for branch in branches:
        both = intersect(base, branch)
        if both is None:
            return None
        merged.append(both)
    return merged
