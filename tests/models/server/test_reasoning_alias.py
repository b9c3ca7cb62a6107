"""Reasoning under both names: SGLang's ``reasoning_content`` and current vLLM's ``reasoning``.
An assistant history message may carry either (the same text twice is fine; two different
texts are a 400 naming both); answers carry both, with the same text."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.models.server.live import LiveServer, bad_request

THOUGHT = "XYZZY thought about it"


def _history(**reasoning: str) -> list[dict]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", **reasoning},
        {"role": "user", "content": "again"},
    ]


def _prompt(live: LiveServer, messages: list[dict]) -> list[int]:
    reply = httpx.post(live.url + "/tokenize", json={"messages": messages}, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()["tokens"]


def test_history_reasoning_under_vllms_name_reaches_the_prompt(glm: LiveServer) -> None:
    with_content = _prompt(glm, _history(reasoning_content=THOUGHT))
    assert with_content != _prompt(glm, _history())  # GLM's template renders it
    assert _prompt(glm, _history(reasoning=THOUGHT)) == with_content
    both = _history(reasoning=THOUGHT, reasoning_content=THOUGHT)
    assert _prompt(glm, both) == with_content


def test_history_reasoning_under_both_names_with_different_texts_is_a_400(
    glm: LiveServer,
) -> None:
    messages = _history(reasoning="one", reasoning_content="two")
    for path, body in (
        ("/tokenize", {"messages": messages}),
        ("/v1/chat/completions", {"messages": messages, "max_tokens": 2}),
    ):
        error = bad_request(httpx.post(glm.url + path, json=body, timeout=60))
        assert "/messages/1/reasoning" in error["message"], error
        assert "reasoning_content" in error["message"], error


BODY = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0}


def test_answers_carry_reasoning_under_both_names(glm: LiveServer) -> None:
    reply = httpx.post(glm.url + "/v1/chat/completions", json=BODY, timeout=120)
    message = reply.json()["choices"][0]["message"]
    assert message["reasoning_content"]
    assert message["reasoning"] == message["reasoning_content"]


@pytest.mark.parametrize("n", [1, 2])
def test_stream_deltas_carry_reasoning_under_both_names(glm: LiveServer, n: int) -> None:
    body = BODY | {"stream": True, "n": n, "seed": 1}
    texts: dict[str, dict[int, str]] = {"reasoning": {}, "reasoning_content": {}}
    with httpx.stream("POST", glm.url + "/v1/chat/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                assert delta.get("reasoning") == delta.get("reasoning_content")
                for key, by_index in texts.items():
                    index = choice["index"]
                    by_index[index] = by_index.get(index, "") + (delta.get(key) or "")
    assert all(texts["reasoning_content"].get(i) for i in range(n))
    assert texts["reasoning"] == texts["reasoning_content"]
