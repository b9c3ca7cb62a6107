"""The bodies SGLang's own clients send: the frontend language (``sglang.lang``'s
RuntimeEndpoint sends ``SglSamplingParams.to_srt_kwargs()``: ``"stop": []`` and
``"stop_token_ids": []`` on every call), and ``sampling_params`` as SGLang's
``SamplingParams(**params)`` takes them (an unknown key fails the request there)."""

from __future__ import annotations

import httpx
import pytest

from tests.models.server.live import LiveServer, bad_request

# What SglSamplingParams.to_srt_kwargs() sends for a default @sgl.function gen() call.
FRONTEND_PARAMS = {
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "max_new_tokens": 4,
    "stop": [],
    "stop_token_ids": [],
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "ignore_eos": False,
    "regex": None,
}
# Newer frontends (sglang/lang/ir.py) add these on every sgl.gen call.
NEWER_FRONTEND_PARAMS = FRONTEND_PARAMS | {
    "n": 1,
    "min_new_tokens": 0,
    "json_schema": None,
    "stop_regex": [],
}
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("params", [FRONTEND_PARAMS, NEWER_FRONTEND_PARAMS])
def test_the_sglang_frontends_generate_body_is_served(kimi: LiveServer, params: dict) -> None:
    reply = httpx.post(
        kimi.url + "/generate",
        json={"text": "Q: 1+1=\nA:", "sampling_params": params},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["meta_info"]["completion_tokens"] >= 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": MESSAGES}),
        ("/v1/completions", {"prompt": "def f("}),
    ],
)
def test_empty_stop_lists_are_no_stops_on_the_openai_routes(
    kimi: LiveServer, path: str, body: dict
) -> None:
    """vLLM's request models default ``stop`` to []; SGLang's pass [] on as no stop strings."""
    for stop in ([], {"stop": [], "stop_token_ids": []}):
        extra = stop if isinstance(stop, dict) else {"stop": stop}
        reply = httpx.post(
            kimi.url + path, json=body | extra | {"max_tokens": 3, "ignore_eos": True}, timeout=60
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["completion_tokens"] == 3


def test_openai_routes_take_as_many_stop_strings_as_the_engine(kimi: LiveServer) -> None:
    """SGLang and vLLM cap ``stop`` at nothing on their OpenAI routes (OpenAI's own cap is 4):
    the model server takes what its engine and /generate take, 16."""
    stops = [f"never-{i}" for i in range(16)]
    for path, body in (
        ("/v1/chat/completions", {"messages": MESSAGES}),
        ("/v1/completions", {"prompt": "def f("}),
    ):
        reply = httpx.post(
            kimi.url + path, json=body | {"stop": stops, "max_tokens": 2}, timeout=60
        )
        assert reply.status_code == 200, reply.text
        error = bad_request(
            httpx.post(kimi.url + path, json=body | {"stop": [*stops, "x"]}, timeout=60)
        )
        assert error["param"] == "stop" and "at most 16" in error["message"]


def test_an_unknown_sampling_param_is_refused_by_name(kimi: LiveServer) -> None:
    """``max_tokens`` is the OpenAI name; SGLang's ``SamplingParams`` fails on it, and ember
    used to drop it and generate its default 128 tokens."""
    error = bad_request(
        httpx.post(
            kimi.url + "/generate",
            json={"text": "hi", "sampling_params": {"max_tokens": 4}},
            timeout=60,
        )
    )
    assert error["param"] == "sampling_params.max_tokens", error
    assert "max_new_tokens" in error["message"] and "sampling_seed" in error["message"]


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("custom_params", {"a": 1}, "custom logit processors"),
        ("stream_interval", 4, "every engine step"),
        ("ebnf", "root ::= 'a'", "EBNF"),
        ("structural_tag", "{}", "structural tags"),
    ],
)
def test_sglang_sampling_params_ember_lacks_are_refused_with_a_reason(
    kimi: LiveServer, key: str, value: object, reason: str
) -> None:
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 2, key: value}}
    error = bad_request(httpx.post(kimi.url + "/generate", json=body, timeout=60))
    assert error["param"] == f"sampling_params.{key}", error
    assert reason in error["message"], error


def test_every_sglang_sampling_param_left_at_its_default_is_taken(kimi: LiveServer) -> None:
    """Each of SGLang's SamplingParams fields, sent as null (its default), is accepted."""
    names = (
        "max_new_tokens stop stop_token_ids stop_regex temperature top_p top_k min_p "
        "frequency_penalty presence_penalty repetition_penalty min_new_tokens n json_schema "
        "regex ebnf structural_tag ignore_eos skip_special_tokens spaces_between_special_tokens "
        "no_stop_trim custom_params stream_interval logit_bias sampling_seed"
    ).split()
    params = dict.fromkeys(names) | {"max_new_tokens": 2}
    reply = httpx.post(
        kimi.url + "/generate", json={"text": "hi", "sampling_params": params}, timeout=60
    )
    assert reply.status_code == 200, reply.text
