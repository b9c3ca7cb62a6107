"""GLM's raw string arguments keep their schema through a real server and the shipped GLM
checkpoint: a named ``get_weather`` call whose ``city`` has ``maxLength: 10`` gave 16-char
cities or ran to ``finish_reason: length`` with hundreds of characters (the grammar put no bound
on raw text), while Kimi's JSON arguments kept it."""

from __future__ import annotations

import datetime
import json
import re

import httpx
import pytest

from tests.models.server.live import LiveServer


def _tool(properties: dict) -> list[dict]:
    parameters = {"type": "object", "properties": properties, "required": list(properties)}
    return [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}]


def _call(live: LiveServer, tools: list[dict], seed: int) -> dict:
    reply = httpx.post(
        live.url + "/v1/chat/completions",
        json={
            "model": "glm",
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "max_completion_tokens": 120,
            "seed": seed,
        },
        timeout=300,
    )
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "stop", choice  # a named function, as OpenAI and vLLM
    (call,) = choice["message"]["tool_calls"]
    return json.loads(call["function"]["arguments"])


@pytest.mark.parametrize("seed", range(6))
def test_a_bounded_city_stays_within_max_length(glm: LiveServer, seed: int) -> None:
    arguments = _call(glm, _tool({"city": {"type": "string", "maxLength": 10}}), seed)
    assert isinstance(arguments["city"], str) and len(arguments["city"]) <= 10, arguments


@pytest.mark.parametrize("seed", range(3))
def test_pattern_format_and_min_length_hold_in_raw_values(glm: LiveServer, seed: int) -> None:
    tools = _tool(
        {
            "station": {"type": "string", "pattern": r"^[A-Z]{2}\d{3}$"},
            "day": {"type": "string", "format": "date"},
            "note": {"type": "string", "minLength": 3, "maxLength": 8},
        }
    )
    arguments = _call(glm, tools, seed)
    assert re.fullmatch(r"[A-Z]{2}\d{3}", arguments["station"]), arguments
    assert datetime.date.fromisoformat(arguments["day"]), arguments
    assert 3 <= len(arguments["note"]) <= 8, arguments


def test_a_pattern_that_can_only_spell_a_marker_is_a_400_naming_it(glm: LiveServer) -> None:
    tools = _tool({"city": {"type": "string", "pattern": "^<tool_call>$"}})
    reply = httpx.post(
        glm.url + "/v1/chat/completions",
        json={
            "model": "glm",
            "messages": [{"role": "user", "content": "Weather?"}],
            "tools": tools,
            "tool_choice": "required",
        },
        timeout=300,
    )
    assert reply.status_code == 400, reply.text
    assert "tools.[0].function.parameters.properties.city.pattern" in reply.text, reply.text
