"""A schema built in Python (no parser bounded its depth) nested thousands of levels deep is the
400 naming where it passes ``MAX_DEPTH``, at every entry that takes a schema: it was a
RecursionError in the walks that come before the compiler's own depth check (``schema_key``'s
and ``value_key``'s ``json.dumps``), a 503 "internal error; please try again" (review42)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.schema_check import check_schema
from ember.models.constrain.schema_depth import MAX_DEPTH, check_depth
from ember.models.constrain.tool_grammars import ToolSignature, check_glm_arguments

DEEP = 3000  # past Python's recursion limit at one frame a level


def _nested_objects(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def _nested_list(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


SCHEMAS: dict[str, Callable[[], dict]] = {
    "subschemas": lambda: _nested_objects(DEEP),
    "an enum value": lambda: {"enum": [_nested_list(DEEP)]},
    "a const value": lambda: {"const": _nested_list(DEEP)},
    "a default value": lambda: {"type": "string", "default": _nested_list(DEEP)},
}
ENTRIES: dict[str, Callable[[dict, str], object]] = {
    "check_schema": lambda schema, path: check_schema(schema, path=path, strict=True),
    "compile_schema": lambda schema, path: compile_schema(schema, path=path, strict=False),
    "check_glm_arguments": lambda schema, path: check_glm_arguments(
        ToolSignature("f", schema, strict=True), path, Automata()
    ),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("shape", list(SCHEMAS))
def test_a_deep_schema_is_refused_naming_where_and_the_bound(shape: str, entry: str) -> None:
    path = "/tools/0/function/parameters"
    with pytest.raises(InvalidRequestField) as caught:
        ENTRIES[entry](SCHEMAS[shape](), path)
    refused = caught.value
    assert refused.field.startswith(path + "/")
    assert refused.field.count("/") - path.count("/") == MAX_DEPTH + 1  # the first level past it
    assert f"a schema nested at most {MAX_DEPTH} levels deep" in str(refused)


def test_the_bound_is_the_compilers_own() -> None:
    # A subschema at MAX_DEPTH compiles (the compiler's rule); one level more is refused, with
    # the same message, by the check before it.
    compile_schema(_nested_objects(MAX_DEPTH // 2 - 1), path="/s")
    with pytest.raises(InvalidRequestField, match=f"at most {MAX_DEPTH} levels deep"):
        compile_schema(_nested_objects(MAX_DEPTH // 2 + 1), path="/s")


def test_a_shared_part_is_walked_once_and_a_part_holding_itself_is_refused() -> None:
    # Python can share a part (2**60 paths through 60 levels of pairs) or make one hold itself;
    # JSON text cannot. Walked per path, the first would never end.
    shared: object = "x"
    for _ in range(60):
        shared = [shared, shared]
    check_depth({"enum": [shared]}, "/s")
    looped: dict = {"type": "object"}
    looped["properties"] = {"a": looped}
    with pytest.raises(InvalidRequestField, match="levels deep"):
        check_depth(looped, "/s")


def test_a_shared_part_met_again_no_deeper_is_not_listed_again() -> None:
    # review43: its items were copied at every arrival before the check that skips it (a
    # Python-built schema sharing one wide object 6,000 times: 2.55 s).
    class Counted(dict):  # type: ignore[type-arg]
        listed = 0

        def items(self):  # type: ignore[no-untyped-def]
            Counted.listed += 1
            return super().items()

    wide = Counted({f"p{i}": {"type": "string"} for i in range(50)})
    schema = {"type": "object", "properties": {f"k{i}": wide for i in range(200)}}
    check_depth(schema, "/response_format")
    assert Counted.listed == 1
