"""GLM tool-call argument values become strict JSON: a value Python's json reads as a
non-finite float (NaN, Infinity, 1e999) stays text, never ``NaN`` in ``arguments``."""

from __future__ import annotations

import json

import pytest

from ember.models.api.tool_values import convert_glm_value, glm_arguments_json


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999", "[1, NaN]"])
@pytest.mark.parametrize("schema", [None, {"type": "number"}, {"type": "array"}])
def test_non_finite_values_stay_text(raw: str, schema: object) -> None:
    value = convert_glm_value(raw, schema)
    assert value == raw
    assert _strict("".join(glm_arguments_json([("x", value)])) + "}") == {"x": raw}


def test_finite_numbers_still_parse() -> None:
    assert convert_glm_value("1.5", {"type": "number"}) == 1.5
    assert convert_glm_value("[1, 2]", None) == [1, 2]


def test_a_value_no_grammar_read_is_not_widened_from_integer_to_number() -> None:
    # maxLength -1 does not compile: no grammar constrained this value, so it is typed by the
    # types its schema lists, and 1.5 is no integer (review32): it stays the string.
    schema = {"type": ["string", "integer"], "maxLength": -1}
    assert convert_glm_value("1.5", schema) == "1.5"
    assert convert_glm_value("7", schema) == 7
    assert convert_glm_value("7.0", {"type": ["string", "number"], "maxLength": -1}) == 7.0


def test_a_whole_float_enum_member_is_an_integer_so_raw_text_stays_the_string_member() -> None:
    # JSON Schema types 1.0 as an integer. GLM writes a string raw, so without a grammar
    # (tool_choice auto) the string member "1.5" of this enum arrives as the text 1.5: typing
    # the member 1.0 as a number (tool_values' own typer did) let the text parse as the
    # number 1.5, which is no member; as an integer, 1.5 fits no type but the string.
    schema = {"enum": [1.0, "1.5"]}
    assert convert_glm_value("1.5", schema) == "1.5"
    assert convert_glm_value("1", schema) == 1
    assert convert_glm_value("1.5", {"enum": [1.25, "x"]}) == 1.5  # a real number stays one
