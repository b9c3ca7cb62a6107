"""A tool's ``parameters`` as the object whose properties GLM writes as key/value pairs.

pydantic's ``model_json_schema()`` (and the openai SDK's ``pydantic_function_tool``) put nested
models in ``$defs`` and refer to them with ``$ref``; a model that is itself referenced makes the
whole parameters schema ``{"$ref": "#/$defs/Args", "$defs": {...}}``. Every ``$ref`` in a tool's
parameters points into the parameters themselves, so properties are compiled and typed against
that root, and a root ``$ref`` (or ``allOf`` of one schema) is followed to the object it names.

    schema, path = arguments_object(parameters, "/tools/0/function/parameters")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ember.models.api.errors import InvalidRequestField

# The most $refs a chain follows (a $ref met twice is a cycle: {"$ref": "#"} names itself), and
# apart from them the most one-schema allOfs one inside the other.
MAX_HOPS = 32
# How GLM writes a value: raw text, JSON, or either (a string among other types).
ValueForm = Literal["raw", "json", "either"]


def resolve_pointer(root: object, pointer: str) -> object:
    """What a local ``$ref`` (``#``, ``#/$defs/Name``) names in ``root``; None if nothing."""
    if pointer == "#":
        return root
    if not pointer.startswith("#/"):
        return None
    target: object = root
    for raw in pointer[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def dereference(schema: object, root: object, path: str, root_path: str) -> tuple[object, str]:
    """``schema`` (at ``path`` in the request) with any ``$ref`` (or ``allOf`` of one schema)
    at its top followed through ``root`` (at ``root_path``), and the path the result has.
    Raises ``InvalidRequestField`` naming a ``$ref`` that leads nowhere, in a circle, or
    through more than ``MAX_HOPS`` others."""
    seen: set[str] = set()
    wrapped = 0  # one-schema allOfs followed
    while isinstance(schema, Mapping):
        ref = schema.get("$ref")
        all_of = schema.get("allOf")
        if isinstance(ref, str):
            if ref in seen:
                raise InvalidRequestField(path, "a $ref that leads to a schema", "a cycle of $refs")
            if len(seen) == MAX_HOPS:
                # None met twice: a chain longer than the walk follows, not a cycle (review43).
                expected = f"a $ref that leads to a schema within {MAX_HOPS} $refs"
                raise InvalidRequestField(path + "/$ref", expected, "a longer chain of them")
            seen.add(ref)
            target = resolve_pointer(root, ref)
            if target is None:
                raise InvalidRequestField(
                    path + "/$ref", "a $ref to a part of this tool's parameters", ref
                )
            schema, path = target, root_path + ref[1:]
        elif isinstance(all_of, list) and len(all_of) == 1:
            wrapped += 1
            if wrapped > MAX_HOPS:
                expected = f"at most {MAX_HOPS} one-schema allOfs one inside the other"
                raise InvalidRequestField(path + "/allOf", expected, "more")
            schema, path = all_of[0], path + "/allOf/0"
        else:
            break
    return schema, path


def follow(schema: object, root: object) -> object:
    """``dereference`` for reading a model's output: the schema a value was generated
    against (the grammar's own walk, same hops), or None where the ``$ref``s lead nowhere."""
    try:
        return dereference(schema, root, "", "")[0]
    except InvalidRequestField:
        return None


def value_kinds(schema: Mapping) -> list[str]:
    """The types a (dereferenced) schema declares at its top, ``nullable`` adding ``null``."""
    declared = schema.get("type")
    kinds = [declared] if isinstance(declared, str) else list(declared or [])
    if schema.get("nullable") is True and "null" not in kinds:
        kinds.append("null")
    return kinds


def value_form(schema: object) -> ValueForm:
    """How GLM writes a value of ``schema`` (already ``dereference``d), which both the grammar
    and the output parser go by: raw text for a string (or one of string enum values), JSON
    for anything else, either when a string is one of several types."""
    if not isinstance(schema, Mapping):
        return "either"
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return "raw"
    kinds = value_kinds(schema)
    if kinds == ["string"]:
        return "raw"
    return "either" if "string" in kinds else "json"


def raw_members(schema: Mapping) -> list[str] | None:
    """The ``enum``/``const`` members GLM writes as raw text (the strings; the others are
    JSON), or None when the (dereferenced) schema lists no values: then any string its string
    keywords allow is raw. The grammar allows these raw and the output parser keeps them
    strings, so a raw ``true`` is the member ``"true"``, never the boolean."""
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if not isinstance(values, list):
        return None
    return [v for v in values if isinstance(v, str)]


def arguments_object(parameters: object, path: str) -> tuple[Mapping, str]:
    """The object schema a call's arguments follow, and its path: ``parameters`` itself, or
    what its root ``$ref`` names. A root ``anyOf``/``oneOf`` (arguments of one of several
    shapes) is a 400 naming it: GLM's grammar walks one list of properties."""
    if parameters is None:
        return {"type": "object", "properties": {}}, path
    schema, where = dereference(parameters, parameters, path, path)
    if not isinstance(schema, Mapping):
        raise InvalidRequestField(where, "an object schema for the arguments", str(schema))
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            raise InvalidRequestField(
                f"{where}/{combinator}",
                "parameters that are one object schema (GLM writes each property as an "
                f"<arg_key>/<arg_value> pair; move the {combinator} into a property)",
                f"'{combinator}' at the root",
                "unsupported_value",
            )
    return schema, where


def lenient_arguments_object(parameters: object) -> Mapping | None:
    """``arguments_object`` for reading a model's output: None instead of an error."""
    try:
        return arguments_object(parameters, "")[0]
    except InvalidRequestField:
        return None
