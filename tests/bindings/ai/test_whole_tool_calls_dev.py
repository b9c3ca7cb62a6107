"""A streamed tool call through a real ``ember dev`` and the tiny GLM: one complete delta in
Workers AI's dialect (``env.AI.run`` and REST ``ai/run``), as the platform's glm-4.7-flash sends
it; in pieces on ``/ai/v1/chat/completions``, as OpenAI streams it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from ember.models.api.sse import parse_sse
from tests.bindings.ai.dev_support import DevServer, serve_ai_project
from tests.bindings.ai.support import GLM

WORKER = """
from workers import Response

async def on_fetch(request, env):
    stream = await env.AI.run("@cf/zai-org/glm-4.7-flash", await request.json())
    return Response(stream, headers={"content-type": "text/event-stream"})
"""
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": CITY}}
INPUTS = {
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [TOOL],
    # Forced: the grammar makes the tiny model call it, whatever its weights.
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "max_tokens": 120,
    "temperature": 0,
    "chat_template_kwargs": {"enable_thinking": False},
    "stream": True,
}


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-whole-tool-calls", WORKER)


def _tool_deltas(reply: httpx.Response) -> list[dict]:
    assert reply.status_code == 200, reply.text
    events = parse_sse(reply.content)
    assert events[-1] == "[DONE]"
    return [
        call
        for e in events
        if isinstance(e, dict)
        for choice in e.get("choices") or []
        for call in choice["delta"].get("tool_calls") or []
    ]


@pytest.mark.parametrize("via", ["binding", "rest"])
def test_workers_ai_streams_each_call_as_one_complete_delta(dev: DevServer, via: str) -> None:
    url = dev.url if via == "binding" else f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}"
    (call,) = _tool_deltas(httpx.post(url, json=INPUTS, timeout=120))
    assert call["index"] == 0 and call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "get_weather"
    jsonschema.validate(json.loads(call["function"]["arguments"]), CITY)


def test_the_openai_endpoint_still_streams_a_call_in_pieces(dev: DevServer) -> None:
    body = {**INPUTS, "model": GLM}
    deltas = _tool_deltas(httpx.post(f"{dev.url}/ai/v1/chat/completions", json=body, timeout=120))
    assert len(deltas) > 1
    assert deltas[0]["function"]["name"] == "get_weather" and deltas[0]["id"]
    assert all("id" not in d and "name" not in d["function"] for d in deltas[1:])
    arguments = "".join(d["function"]["arguments"] for d in deltas)
    jsonschema.validate(json.loads(arguments), CITY)
