"""Regex constraints end to end: a real ``ember models serve`` process with a tiny checkpoint,
asked through SGLang's ``/generate`` ``regex``, the OpenAI routes' ``regex`` and vLLM's
``structured_outputs``, and a chat completion whose JSON schema has ``pattern`` and
``format``; ``re`` and ``jsonschema`` judge what comes back."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest

from tests.models.server.served_process import served_process


@pytest.fixture(scope="module")
def server(glm_dir: Path) -> Iterator[str]:
    with served_process(glm_dir, "glm", "--kv-cache-bytes", "8MiB") as served:
        yield served.url


TEXT_PATTERNS = [r"(yes|no)", r"\d{3}-\d{4}", r"[A-Z][a-z]{2,5}( [A-Z][a-z]{2,5})?", r"[^\n]{4}"]
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.mark.parametrize("pattern", TEXT_PATTERNS)
def test_generate_with_regex_fullmatches(server: str, pattern: str) -> None:
    for seed in range(3):
        body = {
            "text": "def f(",
            "sampling_params": {
                "regex": pattern,
                "max_new_tokens": 64,
                "temperature": 1.0,
                "sampling_seed": seed,
            },
        }
        answer = httpx.post(server + "/generate", json=body, timeout=120).json()
        assert re.fullmatch(pattern, answer["text"], re.ASCII), answer
        assert answer["meta_info"]["finish_reason"]["type"] == "stop"


def test_chat_and_completions_take_sglang_and_vllm_regex(server: str) -> None:
    pattern = r"(red|green|blue)-\d{2}"
    chat = {
        "model": "glm",
        "messages": [{"role": "user", "content": "Pick a colour."}],
        "regex": pattern,
        "max_tokens": 64,
        "seed": 1,
        **NO_THINKING,
    }
    answer = httpx.post(server + "/v1/chat/completions", json=chat, timeout=120).json()
    assert re.fullmatch(pattern, answer["choices"][0]["message"]["content"]), answer
    completion = {
        "prompt": "x = ",
        "structured_outputs": {"regex": pattern},
        "max_tokens": 64,
        "seed": 2,
    }
    answer = httpx.post(server + "/v1/completions", json=completion, timeout=120).json()
    assert re.fullmatch(pattern, answer["choices"][0]["text"]), answer


SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "pattern": r"^[A-Z]{3}-\d{3}$"},
        "note": {"type": "string", "pattern": r"é|\"", "maxLength": 12},
        "day": {"type": "string", "format": "date"},
        "host": {"type": "string", "format": "ipv4"},
    },
    "required": ["code", "note", "day", "host"],
}


def test_chat_json_schema_with_pattern_and_format(server: str) -> None:
    validator = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for seed in range(3):
        body = {
            "model": "glm",
            "messages": [{"role": "user", "content": "A record, please."}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "record", "schema": SCHEMA, "strict": True},
            },
            "max_tokens": 400,
            "seed": seed,
            **NO_THINKING,
        }
        answer = httpx.post(server + "/v1/chat/completions", json=body, timeout=300).json()
        assert "choices" in answer, answer
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "stop", answer
        value = json.loads(choice["message"]["content"])
        validator.validate(value)
        assert re.search(r"é|\"", value["note"]), value


def test_unsupported_regex_is_a_400_naming_the_parameter(server: str) -> None:
    body = {"text": "a", "sampling_params": {"regex": r"(a)\1"}}
    answer = httpx.post(server + "/generate", json=body, timeout=60)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "sampling_params.regex"
    assert "backreference \\1 at offset 3" in error["message"]
    chat = {"messages": [{"role": "user", "content": "x"}], "regex": "a(?=b)"}
    answer = httpx.post(server + "/v1/chat/completions", json=chat, timeout=60)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "regex"
    # 5,000 nested groups: what was too deep, not "internal error (RecursionError)".
    deep = {"messages": [{"role": "user", "content": "x"}], "regex": "(" * 5000 + "a" + ")" * 5000}
    answer = httpx.post(server + "/v1/chat/completions", json=deep, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "regex"
    assert "groups nested more than 100 deep at offset 100" in answer.json()["error"]["message"]
