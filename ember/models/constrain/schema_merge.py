"""Lenient tool schemas: the keywords beside an ``anyOf``/``oneOf`` hold in every alternative.

``{"properties": {...}, "anyOf": [{"required": ["id"]}, {"required": ["email"]}]}`` means "these
properties, with ``id`` or ``email`` present": JSON Schema intersects a combinator with its
siblings. The grammar compiler does not intersect; in lenient mode (tool parameters) it compiles
each alternative with the siblings merged in instead, which is the same set of values for the
keywords it enforces.
"""

from __future__ import annotations

from collections.abc import Mapping


def merge_siblings(schema: Mapping, combinator: str, branches: list) -> list | None:
    """Each alternative with the keywords beside ``combinator`` added (``properties`` joined,
    ``required`` united; the alternative's own keyword wins otherwise), or None when an
    alternative is a ``$ref`` or not a schema object."""
    base = {k: v for k, v in schema.items() if k != combinator}
    merged = []
    for branch in branches:
        if branch is True:
            branch = {}
        if not isinstance(branch, Mapping) or "$ref" in branch:
            return None
        both = {**base, **branch}
        for key, join in (("properties", _join_maps), ("required", _join_lists)):
            if key in base and key in branch:
                both[key] = join(base[key], branch[key])
        merged.append(both)
    return merged


def _join_maps(a: object, b: object) -> object:
    return {**a, **b} if isinstance(a, Mapping) and isinstance(b, Mapping) else b


def _join_lists(a: object, b: object) -> object:
    return list(dict.fromkeys([*a, *b])) if isinstance(a, list) and isinstance(b, list) else b
