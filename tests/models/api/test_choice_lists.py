"""A choice list (vLLM's ``guided_choice`` / ``structured_outputs.choice``) is compiled as the
trie of its choices: work linear in its characters, so lists that worked before the automaton
budget (review43 MEDIUM-2: 5,000 x 30 and 20,000 x 6 characters) fit it, and a list past the
bound is refused naming the list and its bound in choices and characters, not "a regular
expression" the client never sent."""

from __future__ import annotations

import random
import string

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.completion_request import parse_completion_request
from ember.models.api.errors import InvalidRequestField
from ember.models.api.guided_fields import MAX_CHOICE_CHARACTERS, MAX_CHOICES
from ember.models.constrain.automata import Automata
from tests.models.api.chat_bodies import with_fields as chat


def _choices(count: int, length: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = string.ascii_letters + string.digits
    return ["".join(rng.choice(letters) for _ in range(length)) for _ in range(count)]


@pytest.mark.parametrize(("count", "length"), [(5_000, 30), (20_000, 6)])
def test_large_choice_lists_fit_the_budget_with_linear_work(count: int, length: int) -> None:
    choices = _choices(count, length, seed=count)
    characters = count * length
    request = parse_chat_request(chat(guided_choice=choices))
    assert request.regex is not None
    # The pattern's characters, then a trie node and an edge kept per character at most.
    assert request.automata.states <= 3 * (characters + count) + 8
    completion = parse_completion_request(
        {"prompt": "a", "structured_outputs": {"choice": choices}}
    )
    assert completion.regex == request.regex


@pytest.mark.parametrize(
    ("choices", "got"),
    [
        (["x" * 1_000] * (MAX_CHOICE_CHARACTERS // 1_000 + 1), "characters"),
        ([""] * (MAX_CHOICES + 1), f"{MAX_CHOICES + 1:,} choices"),
    ],
)
def test_a_choice_list_past_its_bound_is_refused_naming_the_list(
    choices: list[str], got: str
) -> None:
    for parse in (
        lambda: parse_chat_request(chat(guided_choice=choices)),
        lambda: parse_completion_request(
            {"prompt": "a", "structured_outputs": {"choice": choices}}
        ),
    ):
        with pytest.raises(InvalidRequestField) as caught:
            parse()
        message = str(caught.value)
        assert caught.value.field in ("/guided_choice", "/structured_outputs/choice")
        assert f"at most {MAX_CHOICES:,} choices" in message
        assert f"{MAX_CHOICE_CHARACTERS:,} characters" in message
        assert got in message
        assert "regular expression" not in message


def test_a_choice_list_refused_by_the_shared_budget_says_so() -> None:
    # Within its own bound, but the request's schemas took the budget already.
    budget = Automata()
    budget.charge(budget.limit - 100, "/tools/0/function/parameters")
    with pytest.raises(InvalidRequestField) as caught:
        parse_chat_request(chat(guided_choice=_choices(100, 10, seed=1)), automata=budget)
    message = str(caught.value)
    assert caught.value.field == "/guided_choice"
    assert "a choice list" in message and "regular expression" not in message
    assert f"{budget.limit:,} units" in message
