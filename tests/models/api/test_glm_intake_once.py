"""A GLM request's tool schemas are compiled once from parsing to the GLM check: the check
(constraint_for) draws on the budget parsing left on the request, reuses the automata its JSON
checks built, and is remembered per distinct schema, charging what it charged when it compiled
(review35: each strict tool was compiled twice, the second time against a fresh 200,000-state
budget, 0.33 CPU-s beside parsing's 0.16 for 96 patterns)."""

from __future__ import annotations

import uuid

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.constraints import constraint_for
from ember.models.constrain import automaton_cache
from ember.models.constrain.automata import MAX_AUTOMATON_WORK, AutomatonBudgetExceeded
from ember.models.constrain.regex_nfa import compile_regex


def _body(tag: str, count: int, *, choice: object = "auto", strict: bool = True) -> dict:
    properties = {
        f"p{i}": {"type": "string", "pattern": f"^[0-9a-f]{{200}}-{tag}-{i}$"} for i in range(count)
    }
    parameters = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    tool = {
        "type": "function",
        "function": {"name": "f", "strict": strict, "parameters": parameters},
    }
    return {"messages": [{"role": "user", "content": "hi"}], "tools": [tool], "tool_choice": choice}


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch, own_compile_worker: None) -> list[str]:
    """The pattern of every automaton built, in order (the real compiler, counted): built where
    every ``Automata`` has them built, the process's cache (no compile worker in this process)."""
    patterns: list[str] = []

    def counting(pattern: str, **options: object) -> object:
        patterns.append(pattern)
        return compile_regex(pattern, **options)

    monkeypatch.setattr(automaton_cache, "compile_regex", counting)
    return patterns


@pytest.mark.parametrize("strict, choice", [(True, "auto"), (False, "required")])
def test_each_pattern_is_built_once_from_parse_to_the_glm_check(
    compiled: list[str], strict: bool, choice: str
) -> None:
    tag = uuid.uuid4().hex  # patterns no earlier request brought
    chat = parse_chat_request(_body(tag, 6, choice=choice, strict=strict), dialect="openai")
    parsed = list(compiled)
    assert len(parsed) == 6 and len(set(parsed)) == 6
    constraint_for(chat, tool_format="glm47", reasoning="off")
    assert compiled == parsed  # the GLM check built none of them again
    counted = sum(compile_regex(p, search=True, length=(0, None)).work for p in parsed)
    assert chat.automata.states == counted  # nor counted them again: GLM needs no other regex


def test_a_known_tool_is_neither_compiled_nor_checked_again(compiled: list[str]) -> None:
    tag = uuid.uuid4().hex
    first = parse_chat_request(_body(tag, 4), dialect="openai")
    constraint_for(first, tool_format="glm47", reasoning="off")
    built = len(compiled)
    again = parse_chat_request(_body(tag, 4), dialect="openai")
    constraint_for(again, tool_format="glm47", reasoning="off")
    assert len(compiled) == built
    assert again.automata.states == first.automata.states  # charged alike, known or not


def test_the_glm_check_draws_on_the_request_budget(compiled: list[str]) -> None:
    # A check charged to the request's budget is refused once parsing has used it up; a fresh
    # budget per check would accept it (what the model server did before).
    chat = parse_chat_request(_body(uuid.uuid4().hex, 2), dialect="openai")
    chat.automata.charge(MAX_AUTOMATON_WORK - chat.automata.states, "/other")
    chat.automata.limit = chat.automata.states - 1
    with pytest.raises(AutomatonBudgetExceeded, match="/tools/0/function/parameters"):
        constraint_for(chat, tool_format="glm47", reasoning="off")


def test_a_released_budget_holds_no_automata_and_keeps_its_count() -> None:
    # chat_input releases the request's budget after the GLM check: a request streaming for
    # minutes held every automaton its parsing built (review36: ~41 MiB at the budget's size).
    request = parse_chat_request(_body(uuid.uuid4().hex, 8))
    request_budget = request.automata
    counted = request_budget.states
    assert counted > 0 and request_budget._built
    constraint_for(request, tool_format="glm47", reasoning="off")
    request_budget.release()
    assert not request_budget._built and not request_budget._derived
    assert request_budget.states == counted  # what was spent stays spent
