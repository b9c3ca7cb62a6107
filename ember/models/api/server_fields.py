"""SGLang's and vLLM's request fields beyond OpenAI's that ask for something other than a
constraint (``guided_fields``): honoured where ember has the thing, refused by name where it
has not, so that none comes back silently ignored.

- vLLM's ``include_stop_str_in_output`` / SGLang's ``no_stop_trim``: the stop string that ended
  the output stays at its end (``/generate`` has ``sampling_params.no_stop_trim``);
- SGLang's ``separate_reasoning: false``: the reasoning stays in ``content``, no
  ``reasoning_content``;
- SGLang's ``rid`` on chat and completions: the engine's request id (``/abort_request`` ends
  the request by it, and the answer carries it as its ``id``, as SGLang's does);
- refused: ``lora_path`` (no adapters), ``return_hidden_states``, ``stop_regex`` (served on
  ``/generate``'s ``sampling_params`` only).
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, describe, optional_bool, optional_str

# field -> what ember accepts instead, for the 400
REFUSED = {
    "lora_path": "null (LoRA adapters are not supported: serve a merged checkpoint)",
    "return_hidden_states": "false (hidden states are not returned)",
    "stop_regex": (
        "null (stop regexes are served in /generate's sampling_params only: here use stop "
        "strings or stop_token_ids)"
    ),
}


def refuse_unsupported(
    data: Mapping, path: str = "", keys: tuple[str, ...] = tuple(REFUSED)
) -> None:
    for key in keys:
        value = data.get(key)
        if value not in (None, False, "", [], {}):
            raise InvalidRequestField(
                at(path, key), REFUSED[key], describe(value), "unsupported_value"
            )


def include_stop_str(data: Mapping, path: str = "") -> bool:
    """vLLM's ``include_stop_str_in_output`` or SGLang's ``no_stop_trim`` (either turns it on)."""
    vllm = optional_bool(data, "include_stop_str_in_output", path, False)
    sglang = optional_bool(data, "no_stop_trim", path, False)
    return vllm or sglang


def request_rid(data: Mapping, path: str = "") -> str | None:
    """SGLang's ``rid``: the id to run the request under (an empty one is none, as SGLang's
    ``if rid := request.rid``); one string, as one prompt is served per request."""
    return optional_str(data, "rid", path) or None


def separate_reasoning(data: Mapping, path: str = "") -> bool:
    return optional_bool(data, "separate_reasoning", path, True)
