"""The Responses API's ``input`` items -> chat-completions ``messages``.

Accepted items: a message (``{"role", "content"}``, ``type`` "message" optional; content a
string or ``input_text`` / ``output_text`` / ``refusal`` parts), ``function_call`` (becomes an
assistant tool call; consecutive calls join one assistant message, as parallel calls do),
``function_call_output`` (a ``tool`` message) and ``reasoning`` (the next assistant message's
``reasoning_content``). The output items of a response are all valid input items, so a client
can send a whole conversation back, or name stored ones by id (``item_reference``: kept here
with its id checked, and replaced by the stored item in ``ResponsesCall``). Anything else
(images, files, built-in tool calls) is refused naming the item, never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, describe, require_object, wrong_type

ROLES = ("user", "system", "developer", "assistant")
ITEM_TYPES = "'message', 'function_call', 'function_call_output', 'reasoning' or 'item_reference'"
TEXT_PARTS = {"user": ("input_text",), "system": ("input_text",), "developer": ("input_text",)}
ASSISTANT_PARTS = ("output_text", "input_text", "refusal")


def input_items(value: object, path: str = "/input") -> list[dict[str, Any]]:
    """``input`` as a list of items (a string is one user message); validated here so that
    errors name ``input`` and not the chat messages it becomes."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise wrong_type(path, "a string or an array of input items", value)
    items = []
    for index, raw in enumerate(value):
        where = at(path, index)
        item = dict(require_object(raw, where))
        kind = item.get("type", "message")
        if kind == "message":
            _check_message(item, where)
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                _require_str(item, key, where)
        elif kind == "function_call_output":
            _require_str(item, "call_id", where)
            _tool_output(item.get("output"), at(where, "output"))
        elif kind == "reasoning":
            _reasoning_text(item, where)
        elif kind == "item_reference":
            _require_str(item, "id", where)
        else:
            raise InvalidRequestField(
                at(where, "type"), ITEM_TYPES + " (ember has no other item types)", describe(kind)
            )
        items.append(item)
    return items


def chat_messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Validated items (``input_items``) as chat messages."""
    messages: list[dict[str, Any]] = []
    reasoning: str | None = None
    for item in items:
        kind = item.get("type", "message")
        if kind == "reasoning":
            reasoning = (reasoning or "") + _reasoning_text(item, "")
            continue
        if kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and reasoning is None:
                last.setdefault("tool_calls", []).append(call)
                continue
            messages.append(_assistant(None, reasoning, [call]))
        elif kind == "function_call_output":
            output = _tool_output(item["output"], "")
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
        elif item["role"] == "assistant":
            messages.append(_assistant(_text(item["content"]), reasoning, None))
        else:
            messages.append({"role": item["role"], "content": _text(item["content"])})
        reasoning = None
    if reasoning is not None:  # a trailing thought with no answer after it: keep it visible
        messages.append(_assistant("", reasoning, None))
    return messages


def _assistant(content: str | None, reasoning: str | None, calls: list | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message


def _check_message(item: Mapping[str, Any], where: str) -> None:
    role = item.get("role")
    if role not in ROLES:
        raise InvalidRequestField(at(where, "role"), "one of " + ", ".join(ROLES), describe(role))
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise wrong_type(at(where, "content"), "a string or an array of content parts", content)
    allowed = ASSISTANT_PARTS if role == "assistant" else TEXT_PARTS[role]
    for index, raw in enumerate(content):
        part_at = at(at(where, "content"), index)
        part = require_object(raw, part_at)
        kind = part.get("type")
        if kind not in allowed:
            expected = " or ".join(f"'{k}'" for k in allowed)
            raise InvalidRequestField(
                at(part_at, "type"),
                f"{expected} (ember's models read text only)",
                describe(kind),
                "unsupported_value",
            )
        text_key = "refusal" if kind == "refusal" else "text"
        if not isinstance(part.get(text_key), str):
            raise wrong_type(at(part_at, text_key), "a string", part.get(text_key))


def _text(content: str | list) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", part.get("refusal", "")) for part in content)


def _require_str(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise wrong_type(at(where, key), "a string", value)
    return value


def _tool_output(value: object, where: str) -> str:
    """A ``function_call_output``'s output: a string, or ``input_text`` parts joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for index, part in enumerate(value):
            if not isinstance(part, Mapping) or part.get("type") != "input_text":
                raise InvalidRequestField(
                    at(at(where, index), "type"), "'input_text'", describe(part)
                )
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise wrong_type(where, "a string or an array of input_text parts", value)


def _reasoning_text(item: Mapping[str, Any], where: str) -> str:
    """A reasoning item's text: its ``reasoning_text`` content, else its summary."""
    texts = []
    for key in ("content", "summary"):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise wrong_type(at(where, key), "an array of text parts", parts)
        for index, part in enumerate(parts):
            if not isinstance(part, Mapping) or not isinstance(part.get("text"), str):
                raise wrong_type(at(at(where, key), index), "a part with 'text'", part)
        if parts and not texts:
            texts = [part["text"] for part in parts]
    if item.get("encrypted_content") is not None:
        raise InvalidRequestField(
            at(where, "encrypted_content"),
            "null (ember does not encrypt reasoning; send its content)",
            "a value",
            "unsupported_value",
        )
    return "".join(texts)
