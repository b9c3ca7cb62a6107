"""``loads_strict``: JSON that could not be stored and answered again is refused up front."""

from __future__ import annotations

import json
import random

import pytest

from ember.wirejson import WireJSONError, loads_strict


@pytest.mark.parametrize("text", ["1e999", "-1e999", '{"maximum": 1e400}', "[0.5, 1E+309]"])
def test_numbers_past_a_64_bit_float_are_refused(text: str) -> None:
    with pytest.raises(WireJSONError, match="too large"):
        loads_strict(text)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"a": NaN}'])
def test_the_non_json_constants_are_refused(text: str) -> None:
    with pytest.raises(WireJSONError, match="not a JSON value"):
        loads_strict(text)


def test_an_integer_past_pythons_digit_limit_is_a_wire_error() -> None:
    with pytest.raises(WireJSONError):
        loads_strict("1" * 5000)


def test_finite_numbers_read_as_json_loads_reads_them() -> None:
    rng = random.Random()
    for _ in range(500):
        value = [rng.uniform(-1e307, 1e307), rng.random(), rng.randint(-(2**70), 2**70), 1.5e-320]
        text = json.dumps(value)
        assert loads_strict(text) == json.loads(text)
    assert loads_strict("1.7976931348623157e308") == 1.7976931348623157e308


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_check_body_names_a_number_no_json_answer_can_carry(value: float) -> None:
    # What the model server and the AI gateway read with json.loads (1e999 is inf there).
    from ember.models.api.errors import InvalidRequestField
    from ember.models.api.fields import check_body

    with pytest.raises(InvalidRequestField) as bad:
        check_body({"tools": [{"parameters": {"maximum": value}}]})
    assert bad.value.field == "/tools/0/parameters/maximum"
    check_body({"temperature": 0.5, "seed": 2**80})
