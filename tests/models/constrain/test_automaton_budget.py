"""A schema's regex automata (numeric bounds, patterns) are built once per distinct regex and
bounded in all (review32 #3): a lenient combinator intersecting a bound into hundreds of
alternatives held the builder thread for seconds."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import MAX_AUTOMATON_WORK
from ember.models.constrain.schema import compile_schema
from tests.models.constrain.fixtures import grammar_accepts


def _many_bounds(count: int) -> dict:
    """An object whose ``q`` each alternative bounds differently (review32's probe)."""
    return {
        "type": "object",
        "properties": {"q": {"type": "number"}},
        "anyOf": [{"properties": {"q": {"maximum": k}}} for k in range(count)],
    }


@pytest.mark.parametrize("strict", [False, True])
def test_distinct_bounds_past_the_budget_are_a_400_naming_the_keyword(strict: bool) -> None:
    schema = {"type": "object", "properties": {f"p{k}": {"maximum": k} for k in range(400)}}
    with pytest.raises(InvalidRequestField) as caught:
        compile_schema(schema, path="/p", strict=strict)
    assert caught.value.field.startswith("/p/properties/p")
    assert caught.value.field.endswith("/maximum")
    assert f"{MAX_AUTOMATON_WORK:,} units of automaton work" in str(caught.value)


def test_a_lenient_combinator_is_counted_too() -> None:
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": _many_bounds(400)}}],
    }
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(request)
    assert "/anyOf/" in caught.value.field and "units of automaton work" in str(caught.value)


def test_one_bound_repeated_is_built_once() -> None:
    # 400 copies of one bounded number: within the budget only because it is built once.
    schema = {
        "type": "object",
        "properties": {f"p{k}": {"type": "number", "maximum": 5} for k in range(400)},
        "required": ["p0"],
    }
    node = compile_schema(schema, path="/p", strict=True)
    assert grammar_accepts(node, '{"p0":4.5}')
    assert not grammar_accepts(node, '{"p0":5.5}')


def test_a_few_distinct_bounds_still_compile() -> None:
    node = compile_schema(_many_bounds(20), path="/p", strict=False)
    assert grammar_accepts(node, '{"q":19}')
    assert not grammar_accepts(node, '{"q":20}')
