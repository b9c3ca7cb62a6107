"""Kimi numbers its tool calls across the conversation (``functions.NAME:N``): a forced call
after earlier calls in the history continues the count, as SGLang's
``history_tool_calls_cnt + tool_index``, so ids stay unique for the client's tool loop."""

from __future__ import annotations

import httpx
import pytest

from tests.models.server.live import LiveServer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def _call(call_id: str) -> dict:
    arguments = '{"city":"Paris"}'
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }


def _history(calls: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "What is the weather in Paris?"}]
    ids = [f"functions.get_weather:{i}" for i in range(calls)]
    messages.append({"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids]})
    messages += [{"role": "tool", "tool_call_id": i, "content": "sunny"} for i in ids]
    messages.append({"role": "user", "content": "And again?"})
    return messages


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
)
@pytest.mark.parametrize("earlier", [1, 2])
def test_forced_call_ids_continue_the_history_count(
    kimi: LiveServer, choice: object, earlier: int
) -> None:
    body = {
        "model": "kimi",
        "messages": _history(earlier),
        "tools": TOOLS,
        "tool_choice": choice,
        "parallel_tool_calls": False,
        "max_tokens": 60,
        "temperature": 0,
    }
    reply = httpx.post(kimi.url + "/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    calls = reply.json()["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == [f"functions.get_weather:{earlier}"]
