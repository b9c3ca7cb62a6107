# ruff: noqa: E501  (tables of exact bodies and messages read best unwrapped)
"""``/v1/completions`` and SGLang ``/generate`` bodies."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import SamplingOptions, parse_chat_request
from ember.models.api.completion_request import (
    GenerateRequest,
    parse_completion_request,
    parse_generate_request,
)
from ember.models.api.errors import InvalidRequestField
from ember.models.api.tools import ResponseFormat


def test_completion_defaults_and_forms() -> None:
    request = parse_completion_request({"model": "m", "prompt": "Once"})
    assert (request.prompt, request.prompt_token_ids) == ("Once", None)
    assert request.sampling == SamplingOptions(max_tokens=16)
    assert parse_completion_request({"model": "m", "prompt": [1, 2, 3]}).prompt_token_ids == (
        1,
        2,
        3,
    )
    assert parse_completion_request({"model": "m", "prompt": ["x"]}).prompt == "x"
    assert parse_completion_request({"prompt": "x"}).model is None  # SGLang, vLLM: optional
    assert parse_completion_request({"model": "m", "prompt": [[4, 5]]}).prompt_token_ids == (4, 5)
    full = parse_completion_request(
        {
            "model": "m",
            "prompt": "a",
            "max_tokens": 9,
            "logprobs": 2,
            "stream": True,
            "stream_options": {"include_usage": True},
            "stop": ["\n"],
            "seed": 1,
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
    )
    assert full.sampling == SamplingOptions(
        max_tokens=9, temperature=0.0, seed=1, stop=("\n",), logprobs=True, top_logprobs=2
    )
    assert full.stream and full.include_usage and not full.echo
    assert parse_completion_request({"model": "m", "prompt": "a", "echo": True}).echo
    assert full.response_format == ResponseFormat("json_object")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"model": "m", "prompt": ["a", "b"]},
            "/prompt",
            "expected one prompt per request (send a batch as separate requests), got 2 prompts",
        ),
        (
            {"model": "m", "prompt": [1, -2]},
            "/prompt/1",
            "expected a token id (a non-negative integer), got a number (-2)",
        ),
        (
            {"model": "m", "prompt": {}},
            "/prompt",
            "expected a string or an array of token ids, got an object",
        ),
        ({"model": "m"}, "/prompt", "expected a prompt, got nothing"),
        (
            {"model": "m", "prompt": "x", "n": 2, "best_of": 3},
            "/best_of",
            "expected null or equal to n (2): candidates are not ranked here; ask for n choices "
            "with logprobs and rank them, got 3",
        ),
        (
            {"model": "m", "prompt": "x", "suffix": "end"},
            "/suffix",
            "expected null (suffix insertion is not supported), got a string",
        ),
        (
            {"model": "m", "prompt": "x", "logprobs": 21},  # vLLM's max_logprobs, not 5
            "/logprobs",
            "expected an integer >= 0 and <= 20, got 21",
        ),
        (
            {"model": "m", "prompt": "x", "prompt_logprobs": 1, "stream": True},
            "/prompt_logprobs",
            "expected null or 0 when stream is true (prompt logprobs are not streamed), "
            "got a number (1)",
        ),
        (
            {"model": "m", "prompt": "x", "prompt_logprobs": 21},
            "/prompt_logprobs",
            "expected an integer >= 0 and <= 20, got 21",
        ),
        (
            {"model": "m", "prompt": "x", "max_tokens": 0},
            "/max_tokens",
            "expected an integer >= 1 (0 only with echo: true, a prompt-only pass), got 0",
        ),
    ],
)
def test_completion_errors(body: dict, field: str, message: str) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        parse_completion_request(body)
    assert caught.value.field == field
    assert str(caught.value) == f"Invalid value at '{field}': {message}"


def test_prompt_logprobs_zero_with_stream_asks_for_nothing() -> None:
    """vLLM refuses ``prompt_logprobs`` above 0 with ``stream`` and takes 0: nothing to compute."""
    body = {"prompt": "x", "prompt_logprobs": 0, "stream": True}
    assert parse_completion_request(body).sampling.prompt_logprobs is None
    chat = {"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 0, "stream": True}
    assert parse_chat_request(chat).sampling.prompt_logprobs is None
    unstreamed = parse_completion_request(body | {"stream": False})
    assert unstreamed.sampling.prompt_logprobs == 0  # the prompt tokens' own logprobs


def test_generate_request() -> None:
    request = parse_generate_request(
        {
            "text": "The capital of France is",
            "sampling_params": {
                "temperature": 0,
                "max_new_tokens": 32,
                "top_k": -1,
                "stop": ["."],
                "stop_token_ids": [2],
                "json_schema": '{"type": "string"}',
                "ignore_eos": True,
            },
            "stream": True,
            "return_logprob": True,
            "top_logprobs_num": 2,
            "rid": "abc",
        }
    )
    assert request == GenerateRequest(
        text="The capital of France is",
        input_ids=None,
        sampling=SamplingOptions(
            max_tokens=32,
            temperature=0.0,
            stop=(".",),
            stop_token_ids=(2,),
            ignore_eos=True,
            logprobs=True,
            top_logprobs=2,
            logprobs_mode="processed",  # SGLang's: of the distribution sampled from
        ),
        json_schema={"type": "string"},
        stream=True,
        return_logprob=True,
        top_logprobs_num=2,
        rid="abc",
    )
    scoring = parse_generate_request(
        {
            "input_ids": [1, 2, 3],
            "return_logprob": True,
            "logprob_start_len": 1,
            "top_logprobs_num": 3,
            "sampling_params": {"max_new_tokens": 0},
        }
    )
    # SGLang's start position k: the row at k scores token k + 1, the engine's start.
    assert scoring.logprob_start_len == 1 and scoring.sampling.max_tokens == 0
    assert scoring.sampling.prompt_logprobs == 3 and scoring.sampling.prompt_logprobs_start == 2
    ignored = parse_generate_request({"input_ids": [1], "logprob_start_len": 0})
    assert ignored.logprob_start_len == -1 and ignored.sampling.prompt_logprobs is None
    defaults = parse_generate_request({"input_ids": [1, 2]})
    # No max_new_tokens: the route takes SGLang's 128, clipped to what the context leaves.
    assert defaults.input_ids == (1, 2)
    assert defaults.sampling == SamplingOptions(max_tokens=None, logprobs_mode="processed")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        # The field is named (param "text" / "input_ids"), as the other 400s name theirs.
        ({}, "/text", "expected exactly one of 'text' or 'input_ids', got neither"),
        (
            {"text": "a", "input_ids": [1]},
            "/input_ids",
            "expected exactly one of 'text' or 'input_ids', got both",
        ),
        (
            {"text": "a", "return_logprob": True, "logprob_start_len": -2},
            "/logprob_start_len",
            "expected an integer >= -1, got -2",
        ),
        (
            {"text": ["a", "b"]},
            "/text",
            "expected one prompt per request (send a batch as separate requests), got 2 prompts",
        ),
        (
            {"text": "a", "sampling_params": {"ebnf": "root ::= 'a'"}},
            "/sampling_params/ebnf",
            "expected null (EBNF grammars are not supported: use json_schema or regex), "
            "got a string (\"root ::= 'a'\")",
        ),
        (
            {"text": "a", "sampling_params": {"regex": "(a)\\1"}},
            "/sampling_params/regex",
            "expected a regular expression in ember's subset (literals, escapes, '.', classes, "
            "\\d \\w \\s, quantifiers, groups, alternation, '^' and '$' at the ends), got "
            "backreference \\1 at offset 3 in '(a)\\\\1'",
        ),
        (
            {"text": "a", "sampling_params": {"regex": "a+", "json_schema": "{}"}},
            "/sampling_params/regex",
            "expected only one of json_schema and regex, got both",
        ),
        (
            {"text": "a", "sampling_params": {"json_schema": "{"}},
            "/sampling_params/json_schema",
            "expected a JSON schema encoded as a string, got text that is not JSON",
        ),
        (
            {
                "text": "a",
                "sampling_params": {
                    "json_schema": '{"type": "string", "format": "x", "multipleOf": 1}'
                },
            },
            "/sampling_params/json_schema/multipleOf",
            "expected a schema keyword ember can enforce while generating (see the supported JSON Schema subset; ember refuses one it cannot enforce rather than miss it silently, even where OpenAI's strict mode takes it: drop it, or set strict to false), got 'multipleOf'",
        ),
        (
            {"text": "a", "sampling_params": {"top_k": 0}},
            "/sampling_params/top_k",
            "expected -1 (off) or an integer >= 1, got 0",
        ),
        (
            {"text": "a", "sampling_params": {"top_p": -0.5}},  # 0 is taken, as on chat
            "/sampling_params/top_p",
            "expected a number >= 0 and <= 1, got -0.5",
        ),
        (
            {"text": "a", "sampling_params": {"n": 0}},
            "/sampling_params/n",
            "expected an integer >= 1 and <= 128, got 0",
        ),
    ],
)
def test_generate_errors(body: dict, field: str, message: str) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        parse_generate_request(body)
    assert caught.value.field == field
    assert str(caught.value) == f"Invalid value at '{field}': {message}"


def test_max_tokens_absent_is_openais_16_and_null_is_the_rest_of_the_context_window() -> None:
    # vLLM: CompletionRequest.max_tokens defaults to 16, but an explicit null stays None and
    # get_max_tokens then takes the rest of the context (or generation_config's limit).
    assert parse_completion_request({"prompt": "x"}).sampling.max_tokens == 16
    null = parse_completion_request({"prompt": "x", "max_tokens": None})
    assert null.sampling.max_tokens is None
    assert "max_tokens" not in null.sampling.given  # the checkpoint's limit may still apply
