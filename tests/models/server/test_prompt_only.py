"""Prompt-only passes: SGLang's ``max_new_tokens: 0`` on ``/generate`` and vLLM's ``echo`` with
``max_tokens: 0`` on ``/v1/completions`` (how prompts are scored): no output token, the prompt
counted, finish reason ``length``."""

from __future__ import annotations

import httpx

from tests.models.server.live import LiveServer

PROMPT = [11, 400, 23, 9, 870, 54]


def test_generate_with_max_new_tokens_0_only_prefills(kimi: LiveServer) -> None:
    before = kimi.engine_stats.generation_tokens
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 0}}
    answer = httpx.post(kimi.url + "/generate", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["text"] == "" and data["output_ids"] == []
    meta = data["meta_info"]
    assert meta["prompt_tokens"] == len(PROMPT)
    assert meta["completion_tokens"] == 0
    assert meta["finish_reason"] == {"type": "length", "length": 0}
    assert kimi.engine_stats.generation_tokens == before, "no token may be generated"


def test_generate_with_max_new_tokens_0_streams_one_final_event(kimi: LiveServer) -> None:
    body = {"input_ids": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 0}}
    raw = httpx.post(kimi.url + "/generate", json=body, timeout=60)
    lines = [line for line in raw.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and len(lines) == 2
    assert '"finish_reason":{"type":"length","length":0}' in lines[0].replace(" ", "")


def test_completion_echo_with_max_tokens_0_returns_the_prompt(kimi: LiveServer) -> None:
    body = {"model": "kimi", "prompt": "def main():\n", "echo": True, "max_tokens": 0}
    answer = httpx.post(kimi.url + "/v1/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["choices"][0]["text"] == "def main():\n"
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 0
    assert data["usage"]["prompt_tokens"] > 0


def test_completion_max_tokens_0_without_echo_is_refused(kimi: LiveServer) -> None:
    body = {"model": "kimi", "prompt": "x", "max_tokens": 0}
    answer = httpx.post(kimi.url + "/v1/completions", json=body, timeout=60)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "max_tokens" and "echo" in error["message"]
