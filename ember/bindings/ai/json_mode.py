"""JSON Mode (``response_format`` json_object / json_schema) on the Workers AI dialect: whether
an answer met it, and when not, why, in words that name the one field to change.

The platform does not answer a JSON Mode request whose output is not JSON: it raises "JSON Mode
couldn't be met" (5006). ember says what ran out: the model's thinking (GLM and Kimi think
first by default, in the same token budget) or the JSON itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# The spelling that turns GLM's and Kimi's thinking off, on the platform and here.
THINKING_OFF = '"chat_template_kwargs": {"enable_thinking": false}'


def wants_json(inputs: Mapping[str, Any]) -> bool:
    """True when the caller asked for JSON Mode (``response_format`` json_object/json_schema)."""
    fmt = inputs.get("response_format")
    return isinstance(fmt, Mapping) and fmt.get("type") in ("json_object", "json_schema")


def json_mode_miss(body: object, inputs: Mapping[str, Any]) -> str | None:
    """Why a whole JSON Mode answer is not JSON (the platform then raises "JSON Mode couldn't
    be met" instead of answering), or None when its content parses."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None  # not a chat completion: nothing to judge
    usage = body.get("usage") if isinstance(body, dict) else None
    # One choice that stopped at "length" used the whole budget: its size, when nobody set it.
    used = usage.get("completion_tokens") if isinstance(usage, dict) and len(choices) == 1 else None
    for index, choice in enumerate(choices):  # n choices: every one must hold
        miss = _choice_json_miss(choice, inputs, used) if isinstance(choice, dict) else None
        if miss is not None:
            return miss if len(choices) == 1 else f"choice {index}: {miss}"
    return None


def _choice_json_miss(choice: dict, inputs: Mapping[str, Any], used: object) -> str | None:
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    if message.get("tool_calls"):
        return None  # the model called a tool instead: its arguments are checked elsewhere
    content = message.get("content")
    if choice.get("finish_reason") == "length":
        thought = bool(message.get("reasoning_content"))
        return json_mode_cut_short(
            inputs,
            thinking=thought and not content,
            started=bool(content),
            thought=thought,
            used=used,
        )
    if not isinstance(content, str) or not content.strip():
        return "the answer has no content"
    try:
        json.loads(content)
    except ValueError:
        return "the answer's content is not valid JSON"
    return None


def json_mode_cut_short(
    inputs: Mapping[str, Any],
    *,
    thinking: bool,
    started: bool,
    thought: bool = False,
    used: object = None,
) -> str:
    """Why a JSON Mode answer ended with finish_reason "length", and the field to change.

    ``thinking``: the model was still reasoning when the budget ran out (GLM and Kimi think
    first by default, and the thinking counts against the same budget), so turning thinking
    off is the fix. ``thought``: it reasoned first, then the JSON ran out of what was left.
    Otherwise the JSON itself ran long: the tiny local models in particular write strings
    until something stops them, which ``maxLength``/``maxItems`` in the schema does.
    """
    limit, field = token_limit(inputs, used), limit_field(inputs)
    if thinking:
        return (
            f"the model was still thinking when it reached {limit} (finish_reason 'length'), "
            f"before any JSON; turn thinking off with {THINKING_OFF}, or raise {field}"
        )
    where = "before the JSON was complete" if started else "before any JSON"
    bound = (
        "bound the schema's strings and arrays with maxLength and maxItems"
        if _has_schema(inputs)
        else "ask for shorter JSON (a json_schema with maxLength and maxItems bounds it)"
    )
    if thought:
        return (
            f"the answer reached {limit} (finish_reason 'length') {where}, and the model's "
            f"thinking came first in the same budget; raise {field}, turn thinking off with "
            f"{THINKING_OFF}, or {bound}"
        )
    return f"the answer reached {limit} (finish_reason 'length') {where}; raise {field}, or {bound}"


def json_mode_failure_description(reason: str) -> str:
    """The platform's words first (clients match them), then what happened and what to do."""
    return f"JSON Mode couldn't be met: {reason}"


def token_limit(inputs: Mapping[str, Any], used: object = None) -> str:
    """The budget the answer ran into, as the caller set it; else the default, with its size
    when the answer's usage tells it (a client may have left it out on purpose: langchain's
    Workers AI chat model drops max_tokens for glm-4.7-flash)."""
    for key in ("max_completion_tokens", "max_tokens"):
        if isinstance(inputs.get(key), int):
            return f"{key}={inputs[key]}"
    if isinstance(used, int) and not isinstance(used, bool):
        return f"the default token limit ({used} tokens; no max_completion_tokens was given)"
    return "the model's token limit"


def limit_field(inputs: Mapping[str, Any]) -> str:
    """The field the caller set (so the advice names what they wrote), else the current name."""
    if not isinstance(inputs.get("max_completion_tokens"), int) and isinstance(
        inputs.get("max_tokens"), int
    ):
        return "max_tokens"
    return "max_completion_tokens"


def _has_schema(inputs: Mapping[str, Any]) -> bool:
    fmt = inputs.get("response_format")
    return isinstance(fmt, Mapping) and fmt.get("type") == "json_schema"
