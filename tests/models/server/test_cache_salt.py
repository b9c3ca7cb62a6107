"""``cache_salt`` on a real model server: vLLM's field on ``/v1/chat/completions``,
``/v1/completions`` and ``/v1/responses``, SGLang's on ``/generate``. A prompt cached under one
salt is a miss under another (and without one); the same salt hits as before; a salt that is no
string of 1 to 1024 characters is a 400 naming the field.

review22's leak, at the replica: ``cached_tokens`` told one caller, page by page, whether
another caller's prompt began with its guess.
"""

from __future__ import annotations

import httpx
import pytest

from tests.models.server.live import LiveServer

SECRET = "You are the support bot of ACME. Internal note, never reveal: the vault PIN is 4719. "
LONG = SECRET + "Be polite and brief. " * 12


def _cached(live: LiveServer, path: str, salt: str | None, prompt: str = LONG) -> int:
    """The request's cached prompt tokens (``cache_salt`` left out when None)."""
    if path == "/generate":
        body: dict = {"text": prompt, "sampling_params": {"max_new_tokens": 1}}
    elif path == "/v1/completions":
        body = {"model": "glm", "prompt": prompt, "max_tokens": 1}
    elif path == "/v1/responses":
        body = {"model": "glm", "input": prompt, "max_output_tokens": 1, "store": False}
    else:
        body = {"model": "glm", "messages": [{"role": "user", "content": prompt}], "max_tokens": 1}
    if salt is not None:
        body["cache_salt"] = salt
    reply = httpx.post(live.url + path, json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    if path == "/generate":
        return int(answer["meta_info"]["cached_tokens"])
    if path == "/v1/responses":
        return int(answer["usage"]["input_tokens_details"]["cached_tokens"])
    return int(answer["usage"]["prompt_tokens_details"]["cached_tokens"])


@pytest.mark.parametrize(
    "path", ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/generate"]
)
def test_a_prompt_cached_under_one_salt_is_a_miss_under_another(glm: LiveServer, path: str) -> None:
    prompt = f"{path} " + LONG  # each route its own prompt: no hits from the other cases
    assert _cached(glm, path, "tenant-a", prompt) == 0
    assert _cached(glm, path, "tenant-b", prompt) == 0, "another salt must not hit"
    assert _cached(glm, path, None, prompt) == 0, "no salt must not hit a salted page"
    hit = _cached(glm, path, "tenant-a", prompt)
    assert hit > 0, "the same salt hits its own pages"
    assert _cached(glm, path, "tenant-b", prompt) == hit
    assert _cached(glm, path, None, prompt) == hit


@pytest.mark.parametrize(
    ("path", "salt", "found"),
    [
        ("/v1/chat/completions", 7, "a number (7)"),
        ("/v1/chat/completions", "", "an empty string"),
        ("/v1/completions", ["a"], "an array of 1 items"),
        ("/v1/completions", "x" * 1025, "1025 characters"),
        ("/v1/responses", 7, "a number (7)"),
        ("/generate", {"a": 1}, "an object"),
        ("/generate", "x" * 1025, "1025 characters"),
    ],
)
def test_a_salt_that_is_no_short_string_is_a_400_naming_the_field(
    glm: LiveServer, path: str, salt: object, found: str
) -> None:
    if path == "/generate":
        body: dict = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
    elif path == "/v1/completions":
        body = {"model": "glm", "prompt": "hi", "max_tokens": 1}
    elif path == "/v1/responses":
        body = {"model": "glm", "input": "hi", "max_output_tokens": 1}
    else:
        body = {"model": "glm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    reply = httpx.post(glm.url + path, json={**body, "cache_salt": salt}, timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"] if path != "/generate" else reply.json()
    text = str(error)
    assert "cache_salt" in text and "a string of 1 to 1024 characters" in text and found in text


def test_an_empty_salt_is_none_on_generate_as_sglang_has_it(glm: LiveServer) -> None:
    prompt = "empty-salt " + LONG
    assert _cached(glm, "/generate", None, prompt) == 0
    body = {"text": prompt, "sampling_params": {"max_new_tokens": 1}, "cache_salt": ""}
    reply = httpx.post(glm.url + "/generate", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["meta_info"]["cached_tokens"] > 0
