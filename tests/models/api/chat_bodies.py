"""Request bodies shared by the chat-request tests."""

from __future__ import annotations

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}

BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def with_fields(**fields: object) -> dict:
    return {**BASE, **fields}
