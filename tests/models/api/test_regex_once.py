"""A request's regex (``regex``, ``guided_regex``, ``structured_outputs.regex``, a choice) is
built once, through the request's ``Automata``: charged to its budget, kept in the process's
automaton cache, and found there by the grammar build, which never builds it unbudgeted
(review43 MEDIUM-1: the check's automaton was thrown away and the session built it again, with
no budget, in the server's own process)."""

from __future__ import annotations

import uuid

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.completion_request import parse_completion_request, parse_generate_request
from ember.models.constrain.automata import Automata
from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA
from ember.models.constrain.regex_nodes import RegexText
from ember.models.constrain.session import ConstraintSpec, build_root
from tests.models.api.chat_bodies import with_fields as chat


def _fresh_pattern() -> str:
    # Unique, so that no other test's build is what the cache finds.
    return f"(?:yes|no)-{uuid.uuid4().hex}-[a-z]{{1,4}}"


def _key(pattern: str) -> tuple[str, bool, tuple[int, int | None]]:
    return (pattern, False, (0, None))


@pytest.mark.parametrize("field", ["regex", "guided_regex"])
def test_the_chat_regex_is_charged_to_the_requests_budget(field: str) -> None:
    pattern = _fresh_pattern()
    request = parse_chat_request(chat(**{field: pattern}))
    assert _key(pattern) in request.automata.used
    assert request.automata.states > 0  # its work counted with the request's schemas


def test_the_grammar_build_uses_the_automaton_the_check_built() -> None:
    for parse in (
        lambda p: parse_chat_request(chat(structured_outputs={"regex": p})).regex,
        lambda p: parse_completion_request({"prompt": "a", "regex": p}).regex,
        lambda p: parse_generate_request({"text": "a", "sampling_params": {"regex": p}}).regex,
    ):
        pattern = _fresh_pattern()
        assert parse(pattern) == pattern
        assert _key(pattern) in SHARED_AUTOMATA  # kept by the check
        checked = SHARED_AUTOMATA.automaton(_key(pattern), "/regex")
        body = build_root(ConstraintSpec(regex=pattern), {})
        assert isinstance(body, RegexText)
        assert body.regex is checked  # found, not built again


def test_the_grammar_build_of_a_regex_is_budgeted_and_names_its_field() -> None:
    # Never checked (a spec made by hand, or a cache that dropped it): the session builds it
    # within a budget too. Unbudgeted, this pattern is ~3,000,000 units, seconds of CPU.
    spec = ConstraintSpec(regex="(?:a?b?){500}" * 2, regex_path="/sampling_params/regex")
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        build_root(spec, {})
    assert caught.value.field == "/sampling_params/regex"


def test_a_regex_and_the_requests_schemas_share_one_budget() -> None:
    # What the request's schemas took already is what its regex has left (one budget each).
    budget = Automata()
    budget.charge(budget.limit - 10, "/tools/0/function/parameters")
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        parse_chat_request(chat(regex=_fresh_pattern()), automata=budget)
    assert caught.value.field == "/regex"


def test_a_schemas_regex_built_without_the_schemas_budget_has_one_of_its_own() -> None:
    # number_node / string_regex called with no Automata compiled with no budget at all; no
    # request goes that way (schema.py passes its own), but no caller may build unbounded.
    from ember.models.constrain.number_schema import number_node
    from ember.models.constrain.string_schema import string_regex

    costly = {"type": "string", "pattern": "(?:a?b?){500}" * 2}
    with pytest.raises(AutomatonBudgetExceeded) as caught:
        string_regex(costly, "/s", low=0, high=None, strict=True)
    assert caught.value.field == "/s/pattern"
    node = number_node({"type": "integer", "maximum": 99}, "/n", integer=True, strict=True)
    assert isinstance(node, RegexText)
