"""A named ``tool_choice`` finishes with ``stop``, whichever backend answered.

OpenAI and vLLM answer ``finish_reason: "stop"`` when the request named the function to call
and ``"tool_calls"`` for ``auto`` / ``required`` calls (vLLM's chat_completion/serving.py, both
generators). ember's model server does; SGLang answers ``"tool_calls"`` for a named function
too, so the gateway says its answers the OpenAI way, on both dialects (Workers AI's reference
lists the values and is silent on this case, so its dialect says what OpenAI's does). Only the
finish chunk is touched: every other chunk passes through as the replica's bytes.
"""

from __future__ import annotations

import json
import re

from ember.models.pool.errors import InvalidEvent

# The finish chunk of a call, as either server writes it (compact or spaced JSON).
_TOOL_CALLS_FINISH = re.compile(r'"finish_reason": ?"tool_calls"')


def named_tool_chunk(data: str) -> str:
    """One replica event (a chunk's JSON, or ``[DONE]``) with ``tool_calls`` said ``stop``."""
    if _TOOL_CALLS_FINISH.search(data) is None:
        return data
    try:
        payload = json.loads(data)
    except ValueError:
        raise InvalidEvent(data) from None  # the stream ends with the error event
    return json.dumps(named_tool_result(payload), separators=(",", ":"), ensure_ascii=False)


def named_tool_result(body: object) -> object:
    """A chat completion (or chunk) with each choice's ``tool_calls`` finish said ``stop``."""
    choices = body.get("choices") if isinstance(body, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        if isinstance(choice, dict) and choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return body
