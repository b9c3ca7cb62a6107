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
MESSAGES = [{"role": "user", "content": "hi"}]


def test_the_sglang_frontends_generate_body_is_served(kimi: LiveServer) -> None:
    reply = httpx.post(
        kimi.url + "/generate",
        json={"text": "Q: 1+1=\nA:", "sampling_params": FRONTEND_PARAMS},
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
