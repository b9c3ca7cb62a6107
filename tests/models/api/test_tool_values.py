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
