"""A Responses API request (``POST /v1/responses``) -> ``ResponsesRequest`` -> the chat-completions
body ember's chat path (and any OpenAI-chat replica) serves.

Every field the client may send is either served, accepted with its only value ember can honour
(``background: false``, ``truncation: "disabled"``...), or refused with a 400 naming it and what
is accepted: built-in tools, background mode, ``include`` values, conversations, prompt
templates. An unknown field is refused too (OpenAI's "Unknown parameter"), never ignored.
Validation errors name the Responses field (``input.[2].content``), not the chat field it maps to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.models.api.chat_request import REASONING_EFFORTS
from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import (
    at,
    describe,
    optional_bool,
    optional_int,
    optional_number,
    optional_str,
    require_object,
    wrong_type,
)
from ember.models.api.responses_input import chat_messages, input_items

# Sampling fields mapped one to one onto the chat request (vLLM's extensions included).
PASSED = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "chat_template_kwargs",
    "cache_salt",  # vLLM's: prefix-cache pages shared only under the same salt
)
# Accepted and echoed: they steer nothing ember does (routing hints, labels).
ECHOED = ("user", "safety_identifier", "prompt_cache_key", "metadata")
# Known fields with the one value ember can honour: field -> (accepted values, why).
ONLY = {
    "background": ((False, None), "false (ember answers while the client waits)"),
    "truncation": (("disabled", None), "'disabled' (ember does not drop input items)"),
    "service_tier": (("auto", "default", None), "'auto' or 'default' (ember has one tier)"),
    "top_logprobs": ((0, None), "0 (output logprobs are not served on /v1/responses)"),
    "max_tool_calls": ((None,), "null (use tool_choice and parallel_tool_calls)"),
    "prompt_cache_retention": (("in_memory", None), "'in_memory' (ember's prefix cache)"),
}
REFUSED = {
    "conversation": "no conversation (ember has no Conversations API; use previous_response_id)",
    "prompt": "no prompt template (send instructions and input)",
    "context_management": "no context_management (ember does not compact input)",
    "stream_options": "stream_options only with stream true",
}
KNOWN = {
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "stream",
    "store",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "reasoning",
    "include",
    "previous_response_id",
    "stream_options",
    *PASSED,
    *ECHOED,
    *ONLY,
    *REFUSED,
}
# Any summary asked for is the model's own reasoning text (ember has no summarizer): the AI SDK's
# OpenAI provider reads reasoning only from summaries.
SUMMARIES = ("auto", "concise", "detailed", None)


@dataclass(frozen=True)
class ResponsesRequest:
    """A validated request. ``items``: its own input items (the stored conversation adds the
    previous response's before them); ``echo``: the request's fields as a response repeats them."""

    model: str | None
    items: tuple[dict[str, Any], ...]
    instructions: str | None
    chat: Mapping[str, Any]  # the chat body's fields other than messages, model and stream
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    echo: Mapping[str, Any] = field(default_factory=dict)
    summary: bool = False  # reasoning items carry their text as a summary too

    def chat_body(self, history: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """The chat-completions body: ``history`` (earlier items) and this request's items."""
        messages = chat_messages([*history, *self.items])
        if self.instructions is not None:
            messages.insert(0, {"role": "system", "content": self.instructions})
        body = {**self.chat, "messages": messages, "stream": self.stream}
        if self.model is not None:
            body["model"] = self.model
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        return body


def parse_responses_request(body: object) -> ResponsesRequest:
    data = require_object(body, "/")
    for key in data:
        if key not in KNOWN:
            raise InvalidRequestField(
                f"/{key}",
                "a Responses API field",
                f"Unknown parameter: '{key}'",
                "unknown_parameter",
            )
    for key, (values, expected) in ONLY.items():
        if key in data and data[key] not in values:
            raise InvalidRequestField(f"/{key}", expected, describe(data[key]), "unsupported_value")
    stream = optional_bool(data, "stream", "", False)
    for key, expected in REFUSED.items():
        if data.get(key) is not None and not (key == "stream_options" and stream):
            raise InvalidRequestField(f"/{key}", expected, "a value", "unsupported_parameter")
    if data.get("input") is None:
        raise InvalidRequestField(
            "/input", "a string or an array of input items", "nothing", "missing_required_parameter"
        )
    _include(data.get("include"))
    if data.get("stream_options") is not None:
        options = require_object(data["stream_options"], "/stream_options")
        for key in options:
            if key != "include_obfuscation":
                raise InvalidRequestField(
                    f"/stream_options/{key}",
                    "only include_obfuscation (ember's events are not obfuscated)",
                    "a value",
                )
        optional_bool(options, "include_obfuscation", "/stream_options", False)
    chat: dict[str, Any] = {key: data[key] for key in PASSED if data.get(key) is not None}
    optional_number(data, "temperature", "", minimum=0)
    optional_number(data, "top_p", "", minimum=0, maximum=1)
    limit = optional_int(data, "max_output_tokens", "", minimum=1)
    if limit is not None:
        chat["max_tokens"] = limit
    tools = _tools(data.get("tools"))
    if tools:
        chat["tools"] = tools
    if data.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(data["tool_choice"])
    if data.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = optional_bool(data, "parallel_tool_calls", "", True)
    text = _text(data.get("text"))
    if text is not None:
        chat["response_format"] = text
    summary = _reasoning(data.get("reasoning"), chat)
    metadata = data.get("metadata")
    if metadata is not None:
        _metadata(metadata)
    return ResponsesRequest(
        model=optional_str(data, "model", ""),
        items=tuple(input_items(data["input"])),
        instructions=optional_str(data, "instructions", ""),
        chat=chat,
        stream=stream,
        store=optional_bool(data, "store", "", True),
        previous_response_id=optional_str(data, "previous_response_id", ""),
        echo=_echo(data),
        summary=summary,
    )


def _echo(data: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields a response object repeats (OpenAI's defaults when not sent)."""
    fmt = data.get("text") or {"format": {"type": "text"}}
    return {
        "instructions": data.get("instructions"),
        "max_output_tokens": data.get("max_output_tokens"),
        "metadata": data.get("metadata") or {},
        "parallel_tool_calls": data.get("parallel_tool_calls", True) is not False,
        "previous_response_id": data.get("previous_response_id"),
        "reasoning": data.get("reasoning"),
        "store": data.get("store", True) is not False,
        "temperature": data.get("temperature", 1.0),
        "text": fmt,
        "tool_choice": data.get("tool_choice") or "auto",
        "tools": list(data.get("tools") or []),
        "top_p": data.get("top_p", 1.0),
        "truncation": "disabled",
        "user": data.get("user"),
        "background": False,
        "service_tier": "default",
    }


def _include(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise wrong_type("/include", "an array", value)
    for index, entry in enumerate(value):
        raise InvalidRequestField(
            at("/include", index),
            "no include values (ember serves no encrypted reasoning, logprobs, sources or "
            "tool outputs on /v1/responses)",
            describe(entry),
            "unsupported_value",
        )


def _tools(value: object) -> list[dict[str, Any]]:
    """Responses' flat function tools -> chat's nested ones."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type("/tools", "an array of function tools", value)
    out = []
    for index, raw in enumerate(value):
        where = at("/tools", index)
        tool = require_object(raw, where)
        if tool.get("type") != "function":
            raise InvalidRequestField(
                at(where, "type"),
                "'function' (ember runs no built-in tools: web_search, file_search, "
                "code_interpreter, mcp, computer use... are not served)",
                describe(tool.get("type")),
                "unsupported_value",
            )
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type(at(where, "name"), "the function's name", name)
        function: dict[str, Any] = {"name": name}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(value: object) -> object:
    if isinstance(value, str):
        return value  # none / auto / required: the chat parser checks it
    choice = require_object(value, "/tool_choice")
    kind = choice.get("type")
    if kind == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if kind == "allowed_tools":
        tools = choice.get("tools")
        if not isinstance(tools, list):
            raise wrong_type("/tool_choice/tools", "an array of function tools", tools)
        named = [{"type": "function", "function": {"name": _name(t)}} for t in tools]
        return {
            "type": "allowed_tools",
            "allowed_tools": {"mode": choice.get("mode"), "tools": named},
        }
    raise InvalidRequestField(
        "/tool_choice/type",
        "'function' or 'allowed_tools' (ember has no built-in tools)",
        describe(kind),
        "unsupported_value",
    )


def _name(tool: object) -> object:
    return tool.get("name") if isinstance(tool, Mapping) else tool


def _text(value: object) -> dict[str, Any] | None:
    """``text.format`` -> chat's ``response_format``."""
    if value is None:
        return None
    text = require_object(value, "/text")
    verbosity = text.get("verbosity")
    if verbosity not in (None, "medium"):
        raise InvalidRequestField(
            "/text/verbosity",
            "'medium' (ember does not steer length)",
            describe(verbosity),
            "unsupported_value",
        )
    if text.get("format") is None:
        return None
    fmt = require_object(text["format"], "/text/format")
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind != "json_schema":
        raise InvalidRequestField(
            "/text/format/type",
            "'text', 'json_object' or 'json_schema'",
            describe(kind),
            "unsupported_value",
        )
    if not isinstance(fmt.get("schema"), Mapping):
        raise wrong_type("/text/format/schema", "a JSON schema object", fmt.get("schema"))
    spec = {k: fmt[k] for k in ("name", "description", "schema", "strict") if k in fmt}
    return {"type": "json_schema", "json_schema": spec}


def _reasoning(value: object, chat: dict[str, Any]) -> bool:
    """``reasoning.effort`` -> chat's ``reasoning_effort``; "none" also turns thinking off (the
    GLM and Kimi templates read ``enable_thinking``). True when a summary is asked for
    (``summary``, or its older name ``generate_summary``)."""
    if value is None:
        return False
    reasoning = require_object(value, "/reasoning")
    effort = reasoning.get("effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        expected = "one of " + ", ".join(REASONING_EFFORTS)
        raise InvalidRequestField("/reasoning/effort", expected, describe(effort))
    for key in ("summary", "generate_summary"):
        if reasoning.get(key) not in SUMMARIES:
            raise InvalidRequestField(
                f"/reasoning/{key}",
                "'auto', 'concise', 'detailed' or null (any of them gives the model's "
                "reasoning text as the summary)",
                describe(reasoning.get(key)),
                "unsupported_value",
            )
    if effort is not None:
        chat["reasoning_effort"] = effort
    if effort == "none":
        kwargs = dict(chat.get("chat_template_kwargs") or {})
        kwargs.setdefault("enable_thinking", False)
        chat["chat_template_kwargs"] = kwargs
    return any(reasoning.get(key) is not None for key in ("summary", "generate_summary"))


def _metadata(value: object) -> None:
    metadata = require_object(value, "/metadata")
    if len(metadata) > 16:
        raise InvalidRequestField("/metadata", "at most 16 keys", f"{len(metadata)} keys")
    for key, entry in metadata.items():
        if not isinstance(entry, str) or len(entry) > 512 or len(key) > 64:
            raise wrong_type(at("/metadata", key), "a string of at most 512 characters", entry)
