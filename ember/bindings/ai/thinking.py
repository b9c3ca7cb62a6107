"""Dev-console notes about thinking, for the two ways a caller loses an answer to it.

GLM and Kimi think first by default (Workers AI's ``chat_template_kwargs.enable_thinking``
defaults to true), and the thinking counts against ``max_completion_tokens``. A small budget
then ends inside the reasoning: a 200 whose ``content`` is null (vLLM and SGLang answer the same
way, and the platform has no field for it, so the answer stays as it is). And the other APIs'
ways of turning thinking off are not in the platform's schema for these models, which accepts
and ignores unknown fields: the platform ignores them, so ember does too. Both cases get one
line on the dev console (as vLLM logs the fields it ignored) naming the field that works.
A Responses request (``/ai/v1/responses``, or ``input`` to a gpt-oss id) runs as a chat request,
but its note names what its caller wrote and reads: ``max_output_tokens``, ``reasoning.effort``,
the reasoning item of an ``incomplete`` response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.bindings.ai.json_mode import THINKING_OFF, limit_field, token_limit

# Other APIs' spellings for turning thinking off, which Workers AI's schema for Kimi and GLM
# does not have (the platform ignores them).
IGNORED_SPELLINGS: Mapping[str, str] = {
    "thinking": "Z.ai's and Moonshot's own APIs' spelling",
    "reasoning": "OpenRouter's spelling",
    "enable_thinking": "a top-level enable_thinking (DashScope's spelling)",
}


def ignored_thinking_fields(model: str, inputs: Mapping[str, Any]) -> str | None:
    """The note for a request that tries to steer thinking with a field the platform ignores."""
    found = [key for key in IGNORED_SPELLINGS if key in inputs]
    if not found:
        return None
    which = "; ".join(f"'{key}' ({IGNORED_SPELLINGS[key]})" for key in found)
    return (
        f"{model}: ignored {which}: Workers AI ignores it too. Thinking is on by default; "
        f'turn it off with {THINKING_OFF} (or reasoning_effort "none" in ember)'
    )


def reasoning_cut_short(
    model: str, body: object, inputs: Mapping[str, Any], responses: bool = False
) -> str | None:
    """The note for an answer whose budget ran out while the model was still thinking;
    ``responses``: the caller asked in the Responses API (``inputs``: the chat body it became)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict) or choice.get("finish_reason") != "length":
            continue
        if message.get("content") or not message.get("reasoning_content"):
            continue
        return cut_short_note(model, inputs, responses)
    return None


def cut_short_note(model: str, inputs: Mapping[str, Any], responses: bool = False) -> str:
    """The note itself; a stream's translator (``thinking_ate_answer``) tells when it is due."""
    if responses:
        # The chat body's max_tokens is the request's max_output_tokens (responses_request.py).
        limit = inputs.get("max_tokens")
        spent = f"max_output_tokens={limit}" if isinstance(limit, int) else "the token limit"
        return (
            f"{model}: no message: the model spent all of {spent} thinking (status "
            "'incomplete', reason 'max_output_tokens'; the thinking is in the reasoning item); "
            'turn thinking off with "reasoning": {"effort": "none"}, or raise max_output_tokens'
        )
    return (
        f"{model}: content is null: the model spent all of {token_limit(inputs)} thinking "
        f"(finish_reason 'length', the reasoning is in reasoning_content); turn thinking "
        f"off with {THINKING_OFF}, or raise {limit_field(inputs)}"
    )


def mandatory_effort(model: str, inputs: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """``inputs`` for an id whose platform model always thinks, with ``reasoning_effort:
    "none"`` read as the platform reads it (the model's default effort, thinking on), and the
    note saying so; the inputs unchanged (and no note) otherwise."""
    if inputs.get("reasoning_effort") != "none":
        return inputs, ""
    note = (
        f"{model} always thinks on Workers AI (its catalog marks reasoning mandatory): "
        'reasoning_effort "none" is read as its default effort there, and here'
    )
    return {**inputs, "reasoning_effort": None}, note
