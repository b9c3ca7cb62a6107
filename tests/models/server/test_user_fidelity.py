"""What a user of SGLang or vLLM expects of the same request: extensions that are honoured
(``stop_token_ids``), errors that name the field the client sent in each API's own words."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.models.server.live import LiveServer

PROMPT = "def f("


def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _greedy_ids(live: LiveServer, n: int) -> list[int]:
    answer = httpx.post(
        live.url + "/generate",
        json={"text": PROMPT, "sampling_params": {"max_new_tokens": n, "temperature": 0}},
        timeout=60,
    ).json()
    return answer["output_ids"]


def _error(response: httpx.Response) -> dict:
    assert response.status_code == 400, response.text
    return response.json()["error"]


def test_stop_token_ids_end_a_text_completion(kimi: LiveServer) -> None:
    """vLLM and SGLang take ``stop_token_ids`` on /v1/completions; it used to be ignored."""
    ids = _greedy_ids(kimi, 6)
    stop_id = ids[2]
    first = ids.index(stop_id)  # the stop token's first place in the greedy output
    reply = client(kimi).completions.create(
        model="kimi",
        prompt=PROMPT,
        max_tokens=6,
        temperature=0,
        extra_body={"stop_token_ids": [stop_id]},
    )
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == first + 1


def test_stop_token_ids_end_a_chat_completion(kimi: LiveServer) -> None:
    body = dict(
        model="kimi",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=8,
        temperature=0,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    whole = client(kimi).chat.completions.create(**body, logprobs=True)
    assert whole.usage.completion_tokens >= 3
    tokens = [t.token for t in whole.choices[0].logprobs.content]
    served = kimi.state.served
    assert served is not None
    stop_id = served.tokenizer.backend.token_to_id(tokens[2])
    assert stop_id is not None
    body["extra_body"] = {**body["extra_body"], "stop_token_ids": [stop_id]}
    reply = client(kimi).chat.completions.create(**body)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens == tokens.index(tokens[2]) + 1


def test_stop_token_ids_must_be_token_ids(kimi: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(kimi).completions.create(
            model="kimi", prompt=PROMPT, max_tokens=2, extra_body={"stop_token_ids": ["x"]}
        )
    assert caught.value.param == "stop_token_ids.[0]"
