"""The defects the hostile-body fuzz test (test_fuzz_requests) found, each with the exact body:
a clear 400 naming what was wrong, and nobody else affected."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from ember.models.api.sse import parse_sse
from tests.models.server.live import LiveServer, running_server, server_settings

JSON = {"content-type": "application/json"}
DEEP_ARRAY = b"[" * 100000 + b"]" * 100000


def _nested_schema(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "required": ["a"], "properties": {"a": schema}}
    return schema


def _error(response: httpx.Response) -> dict:
    assert response.status_code == 400, response.text
    return response.json()["error"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/generate"])
def test_a_body_nested_past_the_parser_is_a_400(glm: LiveServer, path: str) -> None:
    # It was a 500 "maximum recursion depth exceeded while decoding a JSON array".
    error = _error(httpx.post(glm.url + path, content=DEEP_ARRAY, headers=JSON, timeout=60))
    assert "nested too deeply" in error["message"] and error["type"] == "invalid_request_error"


def test_a_deep_value_inside_a_body_is_a_400(glm: LiveServer) -> None:
    body = b'{"messages": [' + b"[" * 5000 + b"]" * 5000 + b"]}"
    error = _error(httpx.post(glm.url + "/v1/chat/completions", content=body, headers=JSON))
    assert "nested too deeply" in error["message"]


# Past the schema limit (128 pointer steps: 64 levels) and within the body's (192 steps).
DEEP = _nested_schema(80)


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/generate",
            {
                "text": "x",
                "sampling_params": {"max_new_tokens": 3, "json_schema": json.dumps(DEEP)},
            },
            "sampling_params.json_schema",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "x"}],
                "max_tokens": 3,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": DEEP},
                },
            },
            "response_format.json_schema.schema",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "x"}],
                "max_tokens": 3,
                "tools": [{"type": "function", "function": {"name": "f", "parameters": DEEP}}],
                "tool_choice": "required",
            },
            "tools.[0].function.parameters",
        ),
    ],
)
def test_a_schema_nested_too_deeply_is_a_400_naming_it(
    glm: LiveServer, path: str, body: dict, param: str
) -> None:
    # At 200 levels these were 500s: "maximum recursion depth exceeded in __instancecheck__".
    error = _error(httpx.post(glm.url + path, json=body, timeout=60))
    assert error["param"].startswith(param), error
    assert "nested at most" in error["message"]


def test_a_schema_nested_within_the_limit_is_served(glm: LiveServer) -> None:
    body = {
        "text": "x",
        "sampling_params": {"max_new_tokens": 3, "json_schema": json.dumps(_nested_schema(30))},
    }
    response = httpx.post(glm.url + "/generate", json=body, timeout=60)
    assert response.status_code == 200, response.text


def test_a_duplicate_rid_is_refused_and_leaves_the_first_request_alone(glm: LiveServer) -> None:
    """A second /generate with the rid of one in progress used to replace, then release, the
    first one's grammar: the first request went on unconstrained."""
    first = {
        "text": "The answer:",
        "rid": "dup",
        "stream": True,
        "sampling_params": {"max_new_tokens": 300, "regex": "[a-z]+", "temperature": 1.0},
    }
    second = {"text": "x", "rid": "dup", "sampling_params": {"max_new_tokens": 2}}
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", glm.url + "/generate", json=first) as stream,
    ):
        lines = stream.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
        error = _error(client.post(glm.url + "/generate", json=second))
        assert error["param"] == "rid" and "in use" in error["message"]
        rest = "\n\n".join(lines)
    events = parse_sse(rest.encode())
    assert events[-1] == "[DONE]"
    text = events[-2]["text"]
    assert re.fullmatch("[a-z]*", text), text


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/generate", b'{"text": "\\ud800\\ud800", "prompt": "\\udc00"}', "text"),
        # The first string in the body that has one is named, a field /v1/completions ignores too.
        ("/v1/completions", b'{"text": "\\ud800\\ud800", "prompt": "\\udc00"}', "text"),
        (
            "/v1/chat/completions",
            b'{"messages": [{"role": "user", "content": "a\\udfffb"}], "max_tokens": 2}',
            "messages.[0].content",
        ),
        ("/v1/completions", b'{"prompt": "x", "stop": ["\\ud800"], "max_tokens": 2}', "stop.[0]"),
    ],
)
def test_a_lone_surrogate_is_a_400_naming_the_field(
    glm: LiveServer, path: str, body: bytes, param: str
) -> None:
    # JSON can spell a lone surrogate (\ud800) that no UTF-8 text holds: the tokenizer raised
    # "TextInputSequence must be str", a 500.
    error = _error(httpx.post(glm.url + path, content=body, headers=JSON))
    assert error["param"] == param and "surrogate" in error["message"], error


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": "def f(", "max_tokens": 4, "top_k": 1e308}),
        ("/generate", {"text": "def f(", "sampling_params": {"max_new_tokens": 4, "top_k": 2**63}}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "top_k": 10**30}),
    ],
)
def test_a_top_k_past_int64_is_no_cut_and_the_engine_lives_on(
    glm: LiveServer, path: str, body: dict
) -> None:
    # top_k 1e308 passed validation (any integer >= -1, as SGLang) and overflowed building the
    # batch's top-k tensor on the engine thread: "the engine loop failed", and every request
    # after it, on any connection, was a 500.
    body = {**body, "max_tokens": 4} if path == "/v1/chat/completions" else body
    response = httpx.post(glm.url + path, json=body, timeout=60)
    assert response.status_code == 200, response.text
    canary = {"prompt": "x", "max_tokens": 2}
    after = httpx.post(glm.url + "/v1/completions", json=canary, timeout=60)
    assert after.status_code == 200, after.text


def test_health_is_503_once_the_engine_loop_is_gone(glm_dir: Path) -> None:
    """While the top_k overflow above had killed the engine loop, /health still answered 200 and
    a pool kept routing to a replica that failed every request. (No request can stop the loop
    now, so the test stops it as a crash would leave it: the engine thread gone.)"""
    with running_server(server_settings(str(glm_dir), served_model_name="glm")) as live:
        assert httpx.get(live.url + "/health").status_code == 200
        assert live.state.served is not None
        live.state.served.engine.shutdown()
        response = httpx.get(live.url + "/health")
        assert response.status_code == 503, response.text
        assert response.json()["status"] == "failed" and "engine" in response.json()["error"]


def test_a_value_nested_past_the_limit_is_a_400_naming_the_field(glm: LiveServer) -> None:
    # Deep enough to parse, too deep for what reads it after: chat_template_kwargs 800 levels
    # deep was a 500 ("maximum recursion depth exceeded in comparison").
    deep = '{"type": "array", "items": ' * 800 + "{}" + "}" * 800
    body = (
        '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, '
        f'"chat_template_kwargs": {deep}}}'
    )
    error = _error(httpx.post(glm.url + "/v1/chat/completions", content=body, headers=JSON))
    assert error["param"] == "chat_template_kwargs" and "levels deep" in error["message"], error


DEEP_TEXT = '{"a": ' * 1000 + "1" + "}" * 1000


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "/generate",
            {"text": "x", "sampling_params": {"max_new_tokens": 3, "json_schema": DEEP_TEXT}},
            "sampling_params.json_schema",
        ),
        (
            "/v1/chat/completions",
            {
                "max_tokens": 3,
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "1", "function": {"name": "f", "arguments": DEEP_TEXT}}
                        ],
                    },
                    {"role": "user", "content": "x"},
                ],
            },
            "messages.[0].tool_calls.[0].function.arguments",
        ),
    ],
)
def test_json_text_nested_past_the_parser_is_a_400_naming_it(
    glm: LiveServer, path: str, body: dict, param: str
) -> None:
    # JSON sent as a string inside the body is parsed by the route: it was a 500 as well.
    error = _error(httpx.post(glm.url + path, json=body, timeout=60))
    assert error["param"] == param and "levels deep" in error["message"], error
