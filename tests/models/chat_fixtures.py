"""The shipped tokenizers of both chat families, and conversations that exercise the templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ember.models.tokenizer import Tokenizer

CHECKPOINTS = Path(__file__).resolve().parents[2] / "ember" / "models" / "checkpoints"
FAMILY_CHECKPOINT = {"kimi": "kimi-tiny", "glm": "glm4moe-tiny"}


def family_dir(family: str) -> Path:
    return CHECKPOINTS / FAMILY_CHECKPOINT[family]


def family_tokenizer(family: str) -> Tokenizer:
    return Tokenizer.from_dir(family_dir(family))


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
CALL = {
    "id": "functions.get_weather:0",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}},
}
TOOL_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Zürich?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Ask the tool.",
        "tool_calls": [CALL],
    },
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
    {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."},
    {"role": "user", "content": "Thanks!"},
]
CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}],
    TOOL_CONVERSATION,
    TOOL_CONVERSATION[:4],
    TOOL_CONVERSATION[:5],
    [
        {
            "role": "user",
            "content": [{"type": "text", "text": "multi"}, {"type": "text", "text": "part"}],
        },
        {"role": "assistant", "content": "<think>inline</think>answer"},
        {"role": "user", "content": "again"},
    ],
]
