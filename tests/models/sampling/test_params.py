"""SamplingParams: defaults, request parsing, and one clear error per bad field."""

from __future__ import annotations

import pytest

from ember.errors import InvalidModelInput
from ember.models.sampling import SamplingParams


def test_defaults_follow_the_chat_completions_schema() -> None:
    params = SamplingParams.from_request({"messages": [{"role": "user", "content": "hi"}]})
    assert params == SamplingParams()
    assert (params.temperature, params.top_p, params.frequency_penalty) == (1.0, 1.0, 0.0)
    assert params.max_tokens is None and params.stop == () and not params.greedy


def test_request_fields_and_nulls() -> None:
    params = SamplingParams.from_request(
        {
            "temperature": 0,
            "top_p": None,  # null = default
            "top_k": 40,
            "seed": 7,
            "frequency_penalty": -2,
            "presence_penalty": 2,
            "repetition_penalty": 1.1,
            "max_tokens": 10,
            "stop": "\n\n",
            "stop_token_ids": [5, 6],
            "logprobs": True,
            "top_logprobs": 20,
            "ignore_eos": True,
            "tools": [],  # unrelated keys are ignored
        }
    )
    assert params.greedy and params.top_p == 1.0 and params.top_k == 40 and params.seed == 7
    assert params.stop == ("\n\n",) and params.stop_token_ids == (5, 6)
    assert params.max_tokens == 10 and params.top_logprobs == 20 and params.ignore_eos


def test_max_completion_tokens_wins_and_model_defaults_fill_gaps() -> None:
    body = {"max_tokens": 5, "max_completion_tokens": 9, "temperature": None}
    params = SamplingParams.from_request(body, defaults={"temperature": 0.6, "top_p": 0.95})
    assert params.max_tokens == 9 and params.temperature == 0.6 and params.top_p == 0.95
    assert SamplingParams.from_request({"top_p": 0.5}, defaults={"top_p": 0.95}).top_p == 0.5


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("temperature", -0.1, "finite number >= 0"),
        ("temperature", "0.5", "finite number >= 0"),
        ("temperature", True, "finite number >= 0"),
        ("temperature", float("nan"), "finite number >= 0"),
        ("temperature", float("inf"), "finite number >= 0"),
        ("top_p", 1.5, "between 0 and 1"),
        ("frequency_penalty", 2.01, "between -2 and 2"),
        ("presence_penalty", -3, "between -2 and 2"),
        ("repetition_penalty", 0, "finite number > 0"),  # any > 0, as vLLM and SGLang
        ("repetition_penalty", float("inf"), "finite number > 0"),
        ("top_k", -2, "integer >= 1, or 0 / -1"),
        ("top_k", 2.5, "integer >= 1, or 0 / -1"),
        ("seed", 2**64, "integer between"),
        ("seed", "42", "integer between"),
        ("max_tokens", 0, "integer >= 1"),
        ("max_completion_tokens", 1.5, "integer >= 1"),
        ("stop", ["a", "b", "c", "d", "e"], "list of 1 to 4"),
        ("stop", ["ok", ""], "list of 1 to 4"),
        ("stop", 5, "list of 1 to 4"),
        ("stop_token_ids", [-1], "integers >= 0"),
        ("stop_token_ids", 3, "integers >= 0"),
        ("logprobs", "yes", "true or false"),
        ("ignore_eos", 1, "true or false"),
        ("top_logprobs", 21, "between 0 and 20"),
        ("min_p", 1.5, "between 0 and 1"),
        ("min_tokens", -1, "integer >= 0"),
        ("logit_bias", [1, 2], "an object mapping token ids"),
    ],
)
def test_each_bad_value_names_the_field_and_the_range(
    field: str, value: object, expected: str
) -> None:
    body = {field: value}
    if field == "top_logprobs":
        body["logprobs"] = True
    with pytest.raises(InvalidModelInput, match=expected) as caught:
        SamplingParams.from_request(body)
    assert caught.value.field == field
    shown = value[-1] if isinstance(value, list) and field == "stop_token_ids" else value
    shown = "''" if value == ["ok", ""] else repr(shown)
    assert str(caught.value).startswith(field) and shown in str(caught.value)


def test_logit_bias_and_min_tokens() -> None:
    params = SamplingParams.from_request({"logit_bias": {"7": -100, "3": 2.5}, "min_tokens": 4})
    assert params.logit_bias == ((3, 2.5), (7, -100)) and params.min_tokens == 4
    with pytest.raises(InvalidModelInput, match=r"logit_bias\[7\] must be a number between -100"):
        SamplingParams.from_request({"logit_bias": {"7": 101}})
    with pytest.raises(InvalidModelInput, match="keys are token ids") as caught:
        SamplingParams.from_request({"logit_bias": {"seven": 1}})
    assert caught.value.field == "logit_bias"
    with pytest.raises(InvalidModelInput, match=r"at most max_tokens \(2\)"):
        SamplingParams.from_request({"min_tokens": 3, "max_tokens": 2})


def test_from_the_chat_api_options() -> None:
    from ember.models.api.chat_request import parse_sampling

    body = {"temperature": 0.2, "top_k": -1, "min_p": 0.1, "logit_bias": {"5": 1}, "stop": "x"}
    params = SamplingParams.from_options(parse_sampling(body))
    assert params == SamplingParams(temperature=0.2, min_p=0.1, logit_bias=((5, 1.0),), stop=("x",))


def test_top_logprobs_requires_logprobs() -> None:
    with pytest.raises(InvalidModelInput, match="requires logprobs") as caught:
        SamplingParams.from_request({"top_logprobs": 3})
    assert caught.value.field == "top_logprobs"


def test_max_tokens_limit_from_the_context_window() -> None:
    assert SamplingParams.from_request({"max_tokens": 100}, max_tokens_limit=100).max_tokens == 100
    with pytest.raises(InvalidModelInput, match="between 1 and 100") as caught:
        SamplingParams.from_request({"max_completion_tokens": 101}, max_tokens_limit=100)
    assert caught.value.field == "max_completion_tokens"


def test_body_must_be_an_object() -> None:
    with pytest.raises(InvalidModelInput, match="JSON object"):
        SamplingParams.from_request(["temperature", 1])  # type: ignore[arg-type]


def test_greedy_spellings() -> None:
    assert SamplingParams(temperature=0.0).greedy
    assert SamplingParams(temperature=1e-6).greedy
    assert SamplingParams(top_k=1).greedy
    assert not SamplingParams(temperature=0.01).greedy
    assert SamplingParams(top_k=-1).effective_top_k == 0


def test_the_engine_takes_a_temperature_above_2() -> None:
    # SGLang's and vLLM's SamplingParams refuse only a negative temperature; Workers AI's cap
    # of 2 is the AI gateway's (parse_sampling), not the engine's.
    assert SamplingParams.from_request({"temperature": 3.5}).temperature == 3.5


@pytest.mark.parametrize(
    ("bias", "expected"),
    [
        ({"9" * 5000: 1}, "keys are token ids"),  # int() refuses 4,300+ digits: was a 500
        ({"1": 5, "01": -5}, "one key per token id"),  # one token, two biases
    ],
)
def test_logit_bias_keys_that_name_no_token_or_one_twice_are_refused(
    bias: dict, expected: str
) -> None:
    with pytest.raises(InvalidModelInput, match=expected):
        SamplingParams.from_request({"logit_bias": bias})
