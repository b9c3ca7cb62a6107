"""review26's schema and tool refusals as a client of ``ember models serve`` sees them: a 400
naming the field before anything streams, and the server goes on answering."""

from __future__ import annotations

import httpx
import pytest

from tests.models.server.live import LiveServer

CYCLE = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
HI = [{"role": "user", "content": "x"}]


def _chat(glm: LiveServer, body: dict) -> httpx.Response:
    return httpx.post(glm.url + "/v1/chat/completions", json=body, timeout=60)


@pytest.mark.parametrize("stream", [False, True])
def test_a_reference_cycle_is_a_400_naming_the_ref(glm: LiveServer, stream: bool) -> None:
    # It was 500 "grammar allows no token... dead end" (streamed: 200 and an error event).
    body = {
        "messages": HI,
        "max_tokens": 5,
        "stream": stream,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": CYCLE}},
    }
    response = _chat(glm, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "response_format.json_schema.schema.$ref", error
    assert "#/$defs/a" in error["message"]
    assert _chat(glm, {"messages": HI, "max_tokens": 2}).status_code == 200


def test_too_many_tools_are_a_400_naming_tools(glm: LiveServer) -> None:
    tool = {"type": "object", "properties": {"a": {"type": "string"}}}
    tools = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": tool}} for i in range(129)
    ]
    response = _chat(glm, {"messages": HI, "max_tokens": 2, "tools": tools})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "tools"
