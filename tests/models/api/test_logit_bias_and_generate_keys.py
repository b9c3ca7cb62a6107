"""Request fields review31 found taken by validation and then failing deep inside (500s), or
refused where SGLang serves them: ``logit_bias`` values and keys, ``/generate``'s
``stream_interval`` and null ``stop_token_ids`` entries."""

from __future__ import annotations

import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.completion_request import parse_completion_request, parse_generate_request
from ember.models.api.errors import InvalidRequestField

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


def _parsers(bias: object) -> list[tuple[str, object]]:
    return [
        ("/logit_bias", lambda: parse_chat_request(CHAT | {"logit_bias": bias})),
        ("/logit_bias", lambda: parse_completion_request({"prompt": "hi", "logit_bias": bias})),
        (
            "/sampling_params/logit_bias",
            lambda: parse_generate_request({"text": "hi", "sampling_params": {"logit_bias": bias}}),
        ),
    ]


@pytest.mark.parametrize(
    ("bias", "key", "expected"),
    [
        ({"5": None}, "5", "expected a number from -100 to 100, got null"),
        ({"\u00b2": 1}, "\u00b2", "ASCII digits) as the key"),
        ({"\u0663": 1}, "\u0663", "ASCII digits) as the key"),  # Arabic 3
        ({"7": 1, "x": 1}, "x", "ASCII digits) as the key"),
        # int() refuses strings of over 4,300 digits: a 500 (review34); ten digits are enough.
        ({"9" * 5000: 1}, "9" * 5000, "expected a token id (up to 10 ASCII digits) as the key"),
        ({"12345678901": 1}, "12345678901", "up to 10 ASCII digits"),
        # One token, two biases: which was meant?
        ({"1": 5, "01": -5}, "01", "expected one key per token id, got '01', which names token 1"),
    ],
)
def test_a_logit_bias_entry_that_is_no_token_and_number_is_refused(
    bias: dict, key: str, expected: str
) -> None:
    for path, parse in _parsers(bias):
        with pytest.raises(InvalidRequestField) as caught:
            parse()  # type: ignore[operator]
        assert caught.value.field == f"{path}/{key}"
        assert expected in str(caught.value), str(caught.value)


def test_ascii_digit_keys_are_token_ids() -> None:
    chat = parse_chat_request(CHAT | {"logit_bias": {"42": -100, "007": 5}})
    assert chat.sampling.logit_bias == {42: -100.0, 7: 5.0}


@pytest.mark.parametrize("interval", [None, 1, 1.0, True, 0, False])
def test_stream_interval_of_one_step_is_what_ember_does(interval: object) -> None:
    # SGLang streams every ``stream_interval or server_interval`` steps, by value.
    body = {"text": "hi", "stream": True, "sampling_params": {"stream_interval": interval}}
    assert parse_generate_request(body).stream


@pytest.mark.parametrize("interval", [2, 1.5, -1, "1"])
def test_other_stream_intervals_are_refused_saying_what_one_means(interval: object) -> None:
    body = {"text": "hi", "sampling_params": {"stream_interval": interval}}
    with pytest.raises(InvalidRequestField) as caught:
        parse_generate_request(body)
    assert caught.value.field == "/sampling_params/stream_interval"
    assert "null, 0 or 1" in caught.value.expected and "every engine step" in caught.value.expected


def test_generate_drops_null_stop_token_ids_as_sglang_does() -> None:
    body = {"text": "hi", "sampling_params": {"stop_token_ids": [None, 7, None, 9]}}
    assert parse_generate_request(body).sampling.stop_token_ids == (7, 9)
    with pytest.raises(InvalidRequestField) as caught:  # other non-ids are still refused
        parse_generate_request({"text": "hi", "sampling_params": {"stop_token_ids": [None, -1]}})
    assert caught.value.field == "/sampling_params/stop_token_ids/1"
