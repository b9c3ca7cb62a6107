"""Chat messages: OpenAI's message objects (string content or content parts, assistant tool
calls, tool results), validated with field paths, as typed dataclasses a chat template can
render."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import (
    at,
    describe,
    loads_checked,
    optional_str,
    require_object,
    wrong_type,
)

ROLES = ("system", "developer", "user", "assistant", "tool")

TEXT_ONLY = "'text' (this model reads text only)"


@dataclass(frozen=True)
class ContentPart:
    type: str  # "text" or "image_url"
    text: str | None = None
    image_url: str | None = None


@dataclass(frozen=True)
class HistoryToolCall:
    """A tool call in an earlier assistant turn; ``arguments`` is the JSON object it carried."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_template(self) -> dict:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str | tuple[ContentPart, ...] | None
    name: str | None = None
    tool_calls: tuple[HistoryToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning_content: str | None = None

    def text(self) -> str:
        """The text content (text parts joined), "" when there is none."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content if part.type == "text")

    def to_template(self) -> dict:
        """The dict a Hugging Face chat template expects (developer shown as system)."""
        out: dict[str, Any] = {
            "role": "system" if self.role == "developer" else self.role,
            "content": self.text(),
        }
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [call.to_template() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        return out


def _parts(value: list, path: str, *, allow_images: bool) -> tuple[ContentPart, ...]:
    parts = []
    for i, raw in enumerate(value):
        where = at(path, i)
        part = require_object(raw, where)
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise wrong_type(at(where, "text"), "a string", text)
            parts.append(ContentPart("text", text=text))
        elif kind == "image_url" and allow_images:
            image = require_object(part.get("image_url"), at(where, "image_url"))
            url = optional_str(image, "url", at(where, "image_url"))
            if not url:
                raise wrong_type(at(at(where, "image_url"), "url"), "an image URL", url)
            parts.append(ContentPart("image_url", image_url=url))
        else:
            expected = "'text' or 'image_url'" if allow_images else TEXT_ONLY
            raise InvalidRequestField(at(where, "type"), expected, describe(kind))
    return tuple(parts)


def _content(message: Mapping, path: str, *, allow_images: bool, nullable: bool):
    value = message.get("content")
    where = at(path, "content")
    if value is None:
        if nullable:
            return None
        raise InvalidRequestField(
            where, "a string or an array of content parts", "nothing", "missing_required_parameter"
        )
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _parts(value, where, allow_images=allow_images)
    raise wrong_type(where, "a string or an array of content parts", value)


def _tool_calls(message: Mapping, path: str) -> tuple[HistoryToolCall, ...]:
    value = message.get("tool_calls")
    if value is None:
        return ()
    where = at(path, "tool_calls")
    if not isinstance(value, list):
        raise wrong_type(where, "an array of tool calls", value)
    calls = []
    for i, raw in enumerate(value):
        item_path = at(where, i)
        call = require_object(raw, item_path)
        function = require_object(call.get("function"), at(item_path, "function"))
        fpath = at(item_path, "function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type(at(fpath, "name"), "the function's name", name)
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, str):
            try:
                arguments = (
                    loads_checked(arguments, at(fpath, "arguments")) if arguments.strip() else {}
                )
            except ValueError:
                arguments = None
        if not isinstance(arguments, dict):
            raise InvalidRequestField(
                at(fpath, "arguments"),
                "a JSON object encoded as a string",
                describe(function.get("arguments")),
            )
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise wrong_type(at(item_path, "id"), "a string", call_id)
        calls.append(HistoryToolCall(call_id or f"call_{i}", name, arguments))
    return tuple(calls)


def _reasoning(message: dict, path: str) -> str | None:
    """An assistant turn's reasoning under SGLang's name (``reasoning_content``) or current
    vLLM's (``reasoning``): a client of either must not lose it from the prompt unawares."""
    sglang = optional_str(message, "reasoning_content", path)
    vllm = optional_str(message, "reasoning", path)
    if sglang is not None and vllm is not None and sglang != vllm:
        raise InvalidRequestField(
            at(path, "reasoning"),
            "the same text as reasoning_content (two names for one field), or only one of them",
            "two different texts",
        )
    return sglang if sglang is not None else vllm


def parse_message(raw: object, path: str, *, allow_images: bool) -> ChatMessage:
    message = require_object(raw, path)
    role = message.get("role")
    if role not in ROLES:
        expected = "one of " + ", ".join(repr(r) for r in ROLES)
        raise InvalidRequestField(at(path, "role"), expected, describe(role))
    name = optional_str(message, "name", path)
    if role == "assistant":
        calls = _tool_calls(message, path)
        content = _content(message, path, allow_images=False, nullable=True)
        return ChatMessage(role, content, name, calls, reasoning_content=_reasoning(message, path))
    content = _content(message, path, allow_images=allow_images and role == "user", nullable=False)
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            raise InvalidRequestField(
                at(path, "tool_call_id"),
                "the id of the tool call this answers",
                describe(call_id),
                "missing_required_parameter" if call_id is None else "invalid_type",
            )
        return ChatMessage(role, content, name, tool_call_id=call_id)
    return ChatMessage(role, content, name)


def parse_messages(
    value: object, path: str, *, allow_images: bool = False
) -> tuple[ChatMessage, ...]:
    if not isinstance(value, list) or not value:
        raise wrong_type(path, "a non-empty array of messages", value)
    return tuple(
        parse_message(m, at(path, i), allow_images=allow_images) for i, m in enumerate(value)
    )
