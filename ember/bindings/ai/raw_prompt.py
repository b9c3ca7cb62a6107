"""``raw: true``: the prompt goes to the model as written, without the chat template.

Workers AI's classic schema has ``raw`` (default false) for ``prompt`` inputs: the text is the
model's whole input, so a caller can write its own template. Replicas serve that as OpenAI's
``/v1/completions`` (ember's model server and SGLang both do). The answer keeps the model's own
output shape, a ``chat.completion`` (a stream: ``chat.completion.chunk`` events), so a handler
reads ``choices[0].message.content`` with or without ``raw``.

``raw`` with ``messages`` (or ``tools``, which need the template to be described to the model)
is refused with 5006 naming ``/raw``: ignoring either half would answer something else than
what was asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ember.bindings.ai.fields import SAMPLING_FIELDS
from ember.models.api.errors import InvalidRequestField
from ember.models.pool.errors import InvalidEvent

COMPLETIONS_PATH = "/v1/completions"
# The platform's default for the schema that has ``raw`` (classic models: max_tokens 256).
RAW_DEFAULT_MAX_TOKENS = 256
# Completion fields both ember's model server and SGLang accept: the sampling ones.
FORWARDED = SAMPLING_FIELDS


def wants_raw(inputs: Mapping[str, Any]) -> bool:
    """``raw`` as the caller set it (a boolean, or absent)."""
    raw = inputs.get("raw")
    if raw is None or raw is False:
        return False
    if raw is not True:
        raise InvalidRequestField("/raw", "a boolean", json.dumps(raw), "invalid_type")
    if inputs.get("messages") is not None:
        raise InvalidRequestField(
            "/raw",
            "'prompt' with raw: true ('messages' always go through the chat template)",
            "'messages'",
            "unsupported_value",
        )
    if inputs.get("tools"):
        raise InvalidRequestField(
            "/raw",
            "no 'tools' with raw: true (tools are described to the model by the chat template)",
            "'tools'",
            "unsupported_value",
        )
    return True


def raw_body(model: str, inputs: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The replica's ``/v1/completions`` body for a raw prompt (inputs already validated)."""
    body: dict[str, Any] = {key: inputs[key] for key in FORWARDED if inputs.get(key) is not None}
    limit = inputs.get("max_completion_tokens")
    if limit is None:
        limit = inputs.get("max_tokens")
    body["max_tokens"] = RAW_DEFAULT_MAX_TOKENS if limit is None else limit
    body["model"] = model
    body["prompt"] = inputs["prompt"]
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def as_chat_completion(body: object) -> object:
    """A replica's ``text_completion`` as the ``chat.completion`` the model's schema promises."""
    if not isinstance(body, dict) or body.get("object") != "text_completion":
        return body
    choices = []
    for choice in body.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        message = {"role": "assistant", "content": choice.get("text"), "refusal": None}
        choices.append(
            {
                "index": choice.get("index", 0),
                "message": message,
                "finish_reason": choice.get("finish_reason"),
                "logprobs": None,
            }
        )
    return {**body, "id": _chat_id(body), "object": "chat.completion", "choices": choices}


def as_chat_chunk(data: str) -> str:
    """One streamed ``text_completion`` event as a ``chat.completion.chunk`` event."""
    if data == "[DONE]":
        return data
    try:
        payload = json.loads(data)
    except ValueError:
        raise InvalidEvent(data) from None  # the stream ends with the error event
    if not isinstance(payload, dict) or payload.get("object") != "text_completion":
        return data
    choices = []
    for choice in payload.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        text = choice.get("text")
        choices.append(
            {
                "index": choice.get("index", 0),
                "delta": {"content": text} if text else {},
                "finish_reason": choice.get("finish_reason"),
                "logprobs": None,
            }
        )
    chunk = {**payload, "id": _chat_id(payload), "object": "chat.completion.chunk"}
    chunk["choices"] = choices
    return json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))


def _chat_id(body: dict[str, Any]) -> object:
    """A completion's ``cmpl-`` id as a chat completion's ``chatcmpl-`` (what the object says)."""
    value = body.get("id")
    if isinstance(value, str) and value.startswith("cmpl-"):
        return "chat" + value
    return value
