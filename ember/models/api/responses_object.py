"""Response objects of the Responses API, built from chat-completions results.

A ``chat.completion`` becomes a ``response``: the message's ``reasoning_content`` a ``reasoning``
item (``reasoning_text`` content, and the same text as its ``summary`` when the request asked
for one), its content a ``message`` item (one ``output_text`` part),
each tool call a ``function_call`` item (``call_id`` is the chat call's id); ``finish_reason``
"length" makes the response ``incomplete`` (``max_output_tokens``) and its last item too. The
streamed answer (``responses_events``) builds its items with the same functions, so the final
streamed response has the shape of the whole one.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}


def new_response_id() -> str:
    return "resp_" + secrets.token_hex(24)


def item_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def message_item(id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [text_part(text)],
    }


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(
    id: str, text: str, status: str = "completed", summary: bool = False
) -> dict[str, Any]:
    return {
        "id": id,
        "type": "reasoning",
        "summary": [summary_part(text)] if summary else [],
        "content": [reasoning_part(text)],
        "encrypted_content": None,
        "status": status,
    }


def reasoning_part(text: str) -> dict[str, Any]:
    return {"type": "reasoning_text", "text": text}


def summary_part(text: str) -> dict[str, Any]:
    return {"type": "summary_text", "text": text}


def function_call_item(
    id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    return {
        "id": id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def usage_of(chat_usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Chat usage (prompt/completion tokens and their details) in the Responses names."""
    if not isinstance(chat_usage, Mapping):
        return None
    prompt = int(chat_usage.get("prompt_tokens") or 0)
    completion = int(chat_usage.get("completion_tokens") or 0)
    cached = (chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (chat_usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(cached)},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": int(reasoning)},
        "total_tokens": prompt + completion,
    }


def response_object(
    *,
    id: str,
    model: str,
    created_at: int,
    echo: Mapping[str, Any],
    output: Sequence[Mapping[str, Any]] = (),
    status: str = "in_progress",
    incomplete_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    error: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``response`` object; ``echo``: the request's fields it repeats."""
    done = status in ("completed", "incomplete", "failed")
    return {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "completed_at": int(time.time()) if status == "completed" else None,
        "status": status,
        "error": dict(error) if error is not None else None,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "model": model,
        "output": [dict(item) for item in output],
        "usage": dict(usage) if usage is not None and done else None,
        **echo,
    }


def finish_status(finish_reason: str | None) -> tuple[str, str | None]:
    """(status, incomplete reason) for a chat ``finish_reason``."""
    reason = INCOMPLETE_REASONS.get(finish_reason or "")
    return ("incomplete", reason) if reason else ("completed", None)


def output_items(
    message: Mapping[str, Any], finish_reason: str | None, summary: bool = False
) -> list[dict[str, Any]]:
    """A chat message's reasoning, content and tool calls as output items, in that order; an
    incomplete answer's last item is ``incomplete``."""
    items: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if reasoning:
        items.append(reasoning_item(item_id("rs"), reasoning, summary=summary))
    content = message.get("content")
    if content:
        items.append(message_item(item_id("msg"), content))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(
            function_call_item(
                item_id("fc"),
                str(call.get("id") or item_id("call")),
                str(function.get("name") or ""),
                str(function.get("arguments") or ""),
            )
        )
    status, _ = finish_status(finish_reason)
    if status == "incomplete" and items:
        items[-1]["status"] = "incomplete"
    return items


def from_chat_completion(
    completion: Mapping[str, Any],
    *,
    id: str,
    model: str,
    created_at: int,
    echo: Mapping[str, Any],
    summary: bool = False,
) -> dict[str, Any]:
    """A whole ``chat.completion`` as a finished ``response``; ``summary``: reasoning items
    carry their text as a summary too."""
    choice = (completion.get("choices") or [{}])[0]
    finish = choice.get("finish_reason")
    status, reason = finish_status(finish)
    return response_object(
        id=id,
        model=str(completion.get("model") or model),
        created_at=created_at,
        echo=echo,
        output=output_items(choice.get("message") or {}, finish, summary),
        status=status,
        incomplete_reason=reason,
        usage=usage_of(completion.get("usage")),
    )
