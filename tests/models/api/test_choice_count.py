"""``n``: several choices per request, parsed on chat, completions and ``/generate``."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.completion_request import parse_completion_request, parse_generate_request
from ember.models.api.errors import InvalidRequestField

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("dialect", ["openai", "workers"])
def test_chat_takes_n_up_to_128(dialect: str) -> None:
    assert parse_chat_request({"messages": MESSAGES}, dialect=dialect).n == 1  # type: ignore[arg-type]
    assert parse_chat_request({"messages": MESSAGES, "n": 4}, dialect=dialect).n == 4  # type: ignore[arg-type]
    assert parse_chat_request({"messages": MESSAGES, "n": 128}, dialect=dialect).n == 128  # type: ignore[arg-type]
    for bad in (0, 129, 2.5, "3"):
        with pytest.raises(InvalidRequestField) as caught:
            parse_chat_request({"messages": MESSAGES, "n": bad}, dialect=dialect)  # type: ignore[arg-type]
        assert caught.value.field == "/n"


def test_completions_take_n_and_best_of_equal_to_it() -> None:
    assert parse_completion_request({"prompt": "x", "n": 3}).n == 3
    assert parse_completion_request({"prompt": "x", "n": 3, "best_of": 3}).n == 3
    assert parse_completion_request({"prompt": "x", "best_of": 1}).n == 1
    with pytest.raises(InvalidRequestField) as caught:
        parse_completion_request({"prompt": "x", "n": 2, "best_of": 4})
    assert caught.value.field == "/best_of" and "not ranked" in str(caught.value)
    with pytest.raises(InvalidRequestField) as caught:
        parse_completion_request({"prompt": "x", "n": 200})
    assert caught.value.field == "/n"


def test_generate_takes_sampling_params_n() -> None:
    assert parse_generate_request({"text": "x", "sampling_params": {"n": 5}}).n == 5
    assert parse_generate_request({"text": "x"}).n == 1
    with pytest.raises(InvalidRequestField) as caught:
        parse_generate_request({"text": "x", "sampling_params": {"n": 129}})
    assert caught.value.field == "/sampling_params/n"
