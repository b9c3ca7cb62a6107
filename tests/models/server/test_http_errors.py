"""Malformed requests get OpenAI-style errors naming what was wrong; nothing else is affected."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ember.models.server.wire import MAX_BODY_BYTES
from tests.models.server.live import LiveServer, running_server, server_settings

CHAT = "/v1/chat/completions"
JSON = {"content-type": "application/json"}


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"model": "kimi"}, "messages", "messages"),
        ({"model": "kimi", "messages": "hi"}, "messages", "array"),
        (
            {"model": "kimi", "messages": [{"role": "robot", "content": "x"}]},
            "messages.[0].role",
            "",
        ),
        (
            {"model": "kimi", "messages": [{"role": "user", "content": "x"}], "top_p": 2},
            "top_p",
            "",
        ),
        (
            {"model": "kimi", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
            "",
        ),
        (
            {"model": "kimi", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10**6},
            "max_tokens",
            "context",
        ),
        (
            {"model": "kimi", "messages": [{"role": "user", "content": "x"}], "n": 129},
            "n",
            "<= 128",
        ),
        (
            {
                "model": "kimi",
                "messages": [{"role": "user", "content": "x"}],
                "logit_bias": {"99999999": 1},
            },
            "logit_bias",
            "vocabulary",
        ),
    ],
)
def test_chat_field_errors(kimi: LiveServer, body: dict, param: str, words: str) -> None:
    error = _error(httpx.post(kimi.url + CHAT, json=body), 400)
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert words in error["message"]


def test_body_that_is_not_json(kimi: LiveServer) -> None:
    error = _error(httpx.post(kimi.url + CHAT, content=b"{not json", headers=JSON), 400)
    assert "parse the JSON body" in error["message"]
    assert "empty" in _error(httpx.post(kimi.url + CHAT, content=b"", headers=JSON), 400)["message"]
    assert "object" in _error(httpx.post(kimi.url + CHAT, json=[1, 2]), 400)["message"]


def test_oversized_body_is_a_413(kimi: LiveServer) -> None:
    body = b'{"model": "kimi", "messages": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    _error(httpx.post(kimi.url + CHAT, content=body, headers=JSON, timeout=60), 413)


def test_unknown_route_and_method(kimi: LiveServer) -> None:
    assert _error(httpx.post(kimi.url + "/v1/embeddings", json={}), 404)["code"] == "not_found"
    _error(httpx.get(kimi.url + CHAT), 405)


def test_completion_errors_name_the_field(kimi: LiveServer) -> None:
    error = _error(httpx.post(kimi.url + "/v1/completions", json={"model": "kimi"}), 400)
    assert error["param"] == "prompt"
    error = _error(
        httpx.post(kimi.url + "/v1/completions", json={"model": "kimi", "prompt": ["a", "b"]}),
        400,
    )
    assert error["param"] == "prompt"
    missing = httpx.post(kimi.url + "/v1/completions", json={"model": "x", "prompt": "a"})
    assert _error(missing, 404)["code"] == "model_not_found"


def test_the_server_still_serves_after_bad_requests(kimi: LiveServer) -> None:
    for _ in range(3):
        httpx.post(kimi.url + CHAT, content=b"]", headers=JSON)
    ok = httpx.post(
        kimi.url + CHAT,
        json={"model": "kimi", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2},
        timeout=60,
    )
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] <= 2


def test_api_key(kimi_dir: Path) -> None:
    settings = server_settings(str(kimi_dir), served_model_name="k", api_key="s3cret")
    with running_server(settings) as live:
        # Public as on SGLang (every /health* path) and vLLM (/ping): probes carry no key.
        assert httpx.get(live.url + "/health").status_code == 200
        assert httpx.get(live.url + "/health_generate", timeout=60).status_code == 200
        assert httpx.get(live.url + "/ping").status_code == 200
        assert httpx.get(live.url + "/metrics").status_code == 200
        denied = httpx.get(live.url + "/v1/models")
        assert _error(denied, 401)["code"] == "invalid_api_key"
        wrong = httpx.get(live.url + "/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        good = httpx.get(live.url + "/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert good.status_code == 200
