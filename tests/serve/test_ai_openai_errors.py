"""ember serve's ``/ai/v1`` answers every error in OpenAI's shape, refusals before the route too.

The official ``openai`` client pointed at ``PLATFORM/ai/v1`` reads ``{"error": {"message",
"type", "param", "code"}}``: a Cloudflare envelope there showed as a bare "Error code: 401".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account

CONFIG = BASE_CONFIG + "  accounts:\n    ai_requests_per_minute: 2\n"
MODEL = "@cf/ember/no-such-model"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("openai-errors") / "state", CONFIG)
    try:
        yield process
    finally:
        process.stop()


def _openai_error(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"], error
    return error  # type: ignore[no-any-return]


def test_the_openai_client_reads_why_a_token_was_refused(serve: ServeProcess) -> None:
    client = openai.OpenAI(base_url=serve.url + "/ai/v1", api_key="not-a-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert "the API token is not valid on this platform" in str(refused.value)
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError) as listing:
        client.models.list()
    assert "not valid on this platform" in str(listing.value)


def test_a_missing_token_says_how_to_send_one(serve: ServeProcess) -> None:
    for method, path in (("POST", "/ai/v1/chat/completions"), ("GET", "/ai/v1/models")):
        response = httpx.request(method, serve.url + path, json={}, timeout=30)
        assert response.status_code == 401
        assert "Authorization: Bearer" in _openai_error(response)["message"]  # type: ignore[operator]


def test_paths_methods_sizes_and_rates_refused_in_openai_shape(
    serve: ServeProcess, tmp_path: Path
) -> None:
    _, token = permanent_account(serve, "limited")
    auth = {"authorization": f"Bearer {token}"}
    with httpx.Client(base_url=serve.url, headers=auth, timeout=60) as http:
        bare = http.get("/ai/v1")  # no route at all, not even the catch-all's
        assert bare.status_code == 404
        assert "/ai/v1/chat/completions" in _openai_error(bare)["message"]  # type: ignore[operator]

        wrong = http.get("/ai/v1/chat/completions")
        assert wrong.status_code == 405 and _openai_error(wrong)["code"] == "method_not_allowed"

        big = http.post(
            "/ai/v1/chat/completions",
            content=b" " * (10 * 2**20 + 1),
            headers={"content-type": "application/json"},
        )
        assert big.status_code == 413, big.text
        _openai_error(big)

        chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        first = http.post("/ai/v1/chat/completions", json=chat)
        assert first.status_code == 404, first.text  # the big body and this: the account's 2
        limited = http.post("/ai/v1/chat/completions", json=chat)
        assert limited.status_code == 429
        error = _openai_error(limited)
        assert error["type"] == "rate_limit_error", error
        assert "2 AI requests per minute" in error["message"], error  # type: ignore[operator]

    client = openai.OpenAI(base_url=serve.url + "/ai/v1", api_key=token, max_retries=0)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert "AI requests per minute" in str(refused.value)


def test_the_cloudflare_paths_keep_cloudflares_envelope(serve: ServeProcess) -> None:
    """``/client/v4/accounts/ID/ai/...`` is Cloudflare's API: its auth errors stay v4's."""
    response = httpx.post(
        serve.url + "/client/v4/accounts/x/ai/run/" + MODEL,
        json={"prompt": "hi"},
        headers={"authorization": "Bearer nope"},
        timeout=30,
    )
    assert response.status_code == 401
    assert response.json()["errors"][0]["code"] == 10000
