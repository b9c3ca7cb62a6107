"""vLLM's and SGLang's request extras on ``/ai/v1/chat/completions`` (the OpenAI-compatible
endpoint; ``env.AI.run`` keeps Workers AI's schema and forwards none of them).

The pool may hold ember model servers or SGLang servers, so only the extras both read are
forwarded; vLLM's ``include_stop_str_in_output`` goes as SGLang's ``no_stop_trim``, which both
read the same way. vLLM's structured outputs (``guided_json`` / ``guided_regex`` /
``guided_choice`` and ``structured_outputs.{json, json_object, regex, choice}``, validated and
folded by ``parse_chat_request``) go as the fields both read for the same constraint:
``response_format`` and SGLang's ``regex`` (a choice as the regex of its alternatives); the
grammars and a request-level backend were refused with a 400 before. The rest (vLLM's
``echo``, ``prompt_logprobs``, ``add_generation_prompt``, any unknown field) are ignored, as
Workers AI ignores fields it does not know, rather than refused: a request the platform accepts
must not fail locally. The answer names them in the
``x-ember-ignored-fields`` header, so the loss is never silent (``unknown_fields.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.models.api.chat_request import ChatRequest
from ember.models.api.tools import ResponseFormat

OPENAI_EXTRAS = (
    "stop_token_ids",
    "continue_final_message",
    "skip_special_tokens",
    "no_stop_trim",
    "separate_reasoning",
    "regex",
)
# vLLM's structured-output fields, forwarded as ``constraint_fields`` says (or refused).
GUIDED = (
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_decoding_backend",
    "structured_outputs",
)
# vLLM's spelling -> the field ember's model server and SGLang both read for it.
RENAMED = {"include_stop_str_in_output": "no_stop_trim"}
IGNORED_HEADER = "x-ember-ignored-fields"


def openai_extras(inputs: Mapping[str, Any], request: ChatRequest) -> dict[str, Any]:
    """The extras of ``inputs`` a replica gets (``request``: ``inputs`` as validated)."""
    out = {key: inputs[key] for key in OPENAI_EXTRAS if inputs.get(key) is not None}
    for vllm, sglang in RENAMED.items():
        if inputs.get(vllm) is True:  # either spelling turns it on
            out[sglang] = True
    out.update(constraint_fields(inputs, request))
    return out


def constraint_fields(inputs: Mapping[str, Any], request: ChatRequest) -> dict[str, Any]:
    """vLLM's structured outputs of ``inputs`` as ``regex`` / ``response_format`` (at most one
    constraint per request: ``parse_chat_request`` refused two)."""
    out: dict[str, Any] = {}
    if request.regex is not None and inputs.get("regex") is None:
        out["regex"] = request.regex
    fmt = request.response_format
    if fmt.wants_json and inputs.get("response_format") is None:
        out["response_format"] = response_format_body(fmt)
    return out


def response_format_body(fmt: ResponseFormat) -> dict[str, Any]:
    """``fmt`` as OpenAI's ``response_format`` object."""
    if fmt.type != "json_schema":
        return {"type": "json_object"}
    spec: dict[str, Any] = {"name": fmt.name or "guided_json", "schema": fmt.schema}
    return {"type": "json_schema", "json_schema": spec}
