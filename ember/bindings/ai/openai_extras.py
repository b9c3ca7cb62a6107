"""vLLM's and SGLang's request extras on ``/ai/v1/chat/completions`` (the OpenAI-compatible
endpoint; ``env.AI.run`` keeps Workers AI's schema and forwards none of them).

The pool may hold ember model servers or SGLang servers, so only the extras both read are
forwarded; vLLM's ``include_stop_str_in_output`` goes as SGLang's ``no_stop_trim``, which both
read the same way. The rest (vLLM's ``echo``, ``prompt_logprobs``, ``add_generation_prompt``,
any unknown field) are ignored, as Workers AI ignores fields it does not know, rather than
refused: a request the platform accepts must not fail locally. The answer names them in the
``x-ember-ignored-fields`` header, so the loss is never silent (``unknown_fields.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPENAI_EXTRAS = (
    "stop_token_ids",
    "continue_final_message",
    "skip_special_tokens",
    "no_stop_trim",
    "separate_reasoning",
    "regex",
)
# vLLM's spelling -> the field ember's model server and SGLang both read for it.
RENAMED = {"include_stop_str_in_output": "no_stop_trim"}
IGNORED_HEADER = "x-ember-ignored-fields"


def openai_extras(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The extras of ``inputs`` a replica gets (validated before, by ``parse_chat_request``)."""
    out = {key: inputs[key] for key in OPENAI_EXTRAS if inputs.get(key) is not None}
    for vllm, sglang in RENAMED.items():
        if inputs.get(vllm) is True:  # either spelling turns it on
            out[sglang] = True
    return out
