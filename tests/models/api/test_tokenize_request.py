"""Parsing vLLM's and SGLang's /tokenize and /detokenize bodies: forms, defaults, field errors."""

from __future__ import annotations

import pytest

from ember.models.api.errors import InvalidRequestField
from ember.models.api.tokenize_request import (
    out_of_vocabulary,
    parse_detokenize_request,
    parse_tokenize_request,
)

USER = [{"role": "user", "content": "hi"}]


def test_completion_form_defaults_are_vllms() -> None:
    parsed = parse_tokenize_request({"prompt": "x"})
    assert parsed.prompts == ("x",) and parsed.chat is None and not parsed.batched
    assert parsed.add_special_tokens and not parsed.return_token_strs


def test_chat_form_defaults_are_vllms() -> None:
    parsed = parse_tokenize_request({"messages": USER, "return_token_strs": True})
    assert parsed.chat is not None and parsed.prompts is None
    assert parsed.add_generation_prompt and not parsed.continue_final_message
    assert not parsed.add_special_tokens and parsed.return_token_strs


def test_continuing_the_final_message_turns_the_generation_prompt_off() -> None:
    parsed = parse_tokenize_request({"messages": USER, "continue_final_message": True})
    assert parsed.continue_final_message and not parsed.add_generation_prompt


def test_sglang_batch_of_prompts() -> None:
    parsed = parse_tokenize_request({"prompt": ["a", "b"]})
    assert parsed.prompts == ("a", "b") and parsed.batched


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "/prompt"),
        ({"prompt": "x", "messages": USER}, "/"),
        ({"prompt": 3}, "/prompt"),
        ({"prompt": []}, "/prompt"),
        ({"prompt": ["a", 2]}, "/prompt/1"),
        ({"prompt": "x", "add_special_tokens": "yes"}, "/add_special_tokens"),
        ({"messages": [{"role": "user"}]}, "/messages/0/content"),
        ({"messages": USER, "chat_template": "{{ x }}"}, "/chat_template"),
        (
            {"messages": USER, "continue_final_message": True, "add_generation_prompt": True},
            "/continue_final_message",
        ),
    ],
)
def test_tokenize_errors_name_the_field(body: dict, field: str) -> None:
    with pytest.raises(InvalidRequestField) as error:
        parse_tokenize_request(body)
    assert error.value.field == field


def test_detokenize_takes_ids_or_sglangs_lists_of_ids() -> None:
    flat = parse_detokenize_request({"tokens": [1, 2]})
    assert flat.token_lists == ((1, 2),) and not flat.batched
    assert flat.skip_special_tokens is None
    batch = parse_detokenize_request({"tokens": [[1], [2, 3]], "skip_special_tokens": False})
    assert batch.token_lists == ((1,), (2, 3)) and batch.batched
    assert batch.skip_special_tokens is False
    assert parse_detokenize_request({"tokens": []}).token_lists == ((),)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "/tokens"),
        ({"tokens": "1"}, "/tokens"),
        ({"tokens": [1, -1]}, "/tokens/1"),
        ({"tokens": [1, True]}, "/tokens/1"),
        ({"tokens": [[1], [2, 1.5]]}, "/tokens/1/1"),
        ({"tokens": [1], "skip_special_tokens": 1}, "/skip_special_tokens"),
    ],
)
def test_detokenize_errors_name_the_field(body: dict, field: str) -> None:
    with pytest.raises(InvalidRequestField) as error:
        parse_detokenize_request(body)
    assert error.value.field == field


def test_ids_past_the_vocabulary_are_named_where_they_were_sent() -> None:
    assert out_of_vocabulary(parse_detokenize_request({"tokens": [1, 9]}), 10) is None
    flat = out_of_vocabulary(parse_detokenize_request({"tokens": [1, 10]}), 10)
    assert flat is not None and flat.field == "/tokens/1" and "0..9" in str(flat)
    batch = out_of_vocabulary(parse_detokenize_request({"tokens": [[1], [3, 12]]}), 10)
    assert batch is not None and batch.field == "/tokens/1/1"
