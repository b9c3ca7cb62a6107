"""Workers AI's classic text-generation schema (family A), spoken over a replica's chat API.

Replicas speak OpenAI chat completions only; a classic id (``model_schema.py``) is translated at
the gateway, for ``env.AI.run`` and REST ``ai/run`` (``/ai/v1`` stays OpenAI's):

- inputs: the classic defaults filled in (``max_tokens`` 256, ``temperature`` 0.6), the flat
  ``{name, description, parameters}`` tools in OpenAI's shape, and thinking off, since classic
  models answer directly and the schema has no field for reasoning;
- a whole answer: ``{"response", "tool_calls", "usage"}``, ``tool_calls`` as
  ``[{"name", "arguments"}]`` with ``arguments`` an object (not a JSON string, as in family B),
  and in JSON Mode ``response`` the parsed object;
- a stream: ``{"response": "<text>"}`` events, the tool calls in one event once complete (the
  platform does not stream them piecewise), then ``{"response": "", "usage": {...}}`` and
  ``[DONE]``; a replica's error becomes ``{"errors": [{"code", "message"}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ember.models.api.sse import SSE_DONE, sse_data
from ember.models.pool.errors import InvalidEvent

DEFAULT_MAX_TOKENS = 256
DEFAULT_TEMPERATURE = 0.6
CLASSIC_MAX_TEMPERATURE = 5.0  # the classic schema's "temperature" maximum (family B: 2)
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def classic_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Classic ``inputs`` as the chat request the gateway validates and forwards."""
    out = dict(inputs)
    if out.get("max_tokens") is None and out.get("max_completion_tokens") is None:
        out["max_tokens"] = DEFAULT_MAX_TOKENS
    if out.get("temperature") is None:
        out["temperature"] = DEFAULT_TEMPERATURE
    tools = out.get("tools")
    if isinstance(tools, list):
        out["tools"] = [_openai_tool(tool) for tool in tools]
    if out.get("chat_template_kwargs") is None:
        out["chat_template_kwargs"] = {"enable_thinking": False}
    return out


def classic_limits(classic: bool) -> dict[str, float]:
    """``upstream_request``'s keyword arguments for the model's schema's ranges."""
    return {"max_temperature": CLASSIC_MAX_TEMPERATURE} if classic else {}


def _openai_tool(tool: object) -> object:
    """``{name, description, parameters}`` -> ``{type: function, function: {...}}`` (what any
    replica, SGLang's too, reads); other shapes are left for validation to judge."""
    if isinstance(tool, Mapping) and "type" not in tool and "name" in tool:
        return {"type": "function", "function": dict(tool)}
    return tool


def classic_result(body: object, json_mode: bool) -> object:
    """A replica's ``chat.completion`` as the classic answer (unchanged if it is not one)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(choices, list) or not choices:
        return body
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    message = message if isinstance(message, dict) else {}
    text = message.get("content") or ""
    response: object = text
    if json_mode and text:
        try:
            response = json.loads(text)
        except ValueError:
            response = text  # the gateway refused a JSON miss already; keep what came
    calls = [_call(call) for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    return {"response": response, "tool_calls": calls, "usage": _usage(body.get("usage"))}


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return {"name": function.get("name"), "arguments": _arguments(function.get("arguments"))}


def _arguments(text: object) -> object:
    """The call's arguments as an object; a string that is not JSON (a call cut short by the
    token limit) stays the string it is."""
    if not isinstance(text, str):
        return text if text is not None else {}
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text


def _usage(usage: object) -> dict[str, int]:
    usage = usage if isinstance(usage, dict) else {}
    return {key: int(usage.get(key) or 0) for key in USAGE_FIELDS}


class ClassicStream:
    """One replica stream -> the classic event stream (``StreamTranslator``'s interface)."""

    def __init__(self) -> None:
        self.done = False
        self.thinking_ate_answer = False  # thinking is off for classic requests
        self._calls: dict[int, dict[str, str]] = {}  # index -> name, arguments so far
        self._calls_sent = False

    def feed(self, data: str) -> bytes:
        if self.done:
            return b""
        if data == "[DONE]":
            return self.end()
        try:
            payload = json.loads(data)
        except ValueError:
            raise InvalidEvent(data) from None  # the stream ends with the error event
        if not isinstance(payload, dict):
            return b""
        if "error" in payload:
            self.done = True
            error = payload["error"] if isinstance(payload["error"], dict) else {}
            message = str(error.get("message") or payload["error"])
            code = error.get("code") if isinstance(error.get("code"), int) else 3040
            return sse_data({"errors": [{"code": code, "message": message}]}) + SSE_DONE
        out = b""
        choices = payload.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        if isinstance(first, dict):
            delta = first.get("delta") if isinstance(first.get("delta"), dict) else {}
            if delta.get("content"):
                out += sse_data({"response": delta["content"]})
            for call in delta.get("tool_calls") or []:
                self._add_call(call)
            if first.get("finish_reason"):
                out += self._flush_calls()
        elif isinstance(payload.get("usage"), dict):
            out += self._flush_calls()
            out += sse_data({"response": "", "usage": _usage(payload["usage"])})
        return out

    def _add_call(self, call: object) -> None:
        if not isinstance(call, dict):
            return
        index = call.get("index") if isinstance(call.get("index"), int) else len(self._calls)
        entry = self._calls.setdefault(index, {"name": "", "arguments": ""})
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        entry["name"] += function.get("name") or ""
        entry["arguments"] += function.get("arguments") or ""

    def _flush_calls(self) -> bytes:
        if not self._calls or self._calls_sent:
            return b""
        self._calls_sent = True
        calls = [
            {"name": entry["name"], "arguments": _arguments(entry["arguments"])}
            for _, entry in sorted(self._calls.items())
        ]
        return sse_data({"response": "", "tool_calls": calls})

    def end(self) -> bytes:
        if self.done:
            return b""
        self.done = True
        return self._flush_calls() + SSE_DONE
