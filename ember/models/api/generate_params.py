"""Which keys ``/generate``'s ``sampling_params`` may hold.

SGLang builds ``SamplingParams(**sampling_params)``, so a key it does not know fails the request;
ember used to drop such keys silently (``{"max_tokens": 4}`` ran SGLang's default 128 tokens).
Every key of SGLang's ``SamplingParams`` (python/sglang/srt/sampling/sampling_params.py) is
either honoured or refused by name with the reason; any other key is refused with the list of
accepted names.
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, describe, optional_bool

# SGLang's SamplingParams fields that ember honours (``seed``: ember's older spelling of
# ``sampling_seed``, kept so that bodies written for ember still run).
HONOURED = (
    "max_new_tokens",
    "min_new_tokens",
    "stop",
    "stop_token_ids",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "n",
    "json_schema",
    "regex",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "logit_bias",
    "sampling_seed",
    "seed",
)
# SGLang's fields that ember has no counterpart for: null, empty (or absent) only, else a 400
# saying why.
REFUSED = {
    "ebnf": "null (EBNF grammars are not supported: use json_schema or regex)",
    "structural_tag": "null (structural tags are not supported: use json_schema or regex)",
    "stop_regex": "null (stop regexes are not supported: use stop strings or stop_token_ids)",
    "custom_params": "null (custom logit processors are not supported)",
    "stream_interval": (
        "null or 1 (a stream sends every engine step's tokens, which is what 1 asks for; an "
        "interval of N > 1 steps between chunks is not supported)"
    ),
}
# Values of a REFUSED key that ask for what ember does anyway.
SAME_AS_ABSENT: dict[str, tuple[object, ...]] = {"stream_interval": (1,)}


def check_sampling_keys(params: Mapping, path: str) -> None:
    """Refuse a key SGLang's SamplingParams does not have, and one ember cannot honour."""
    for key, value in params.items():
        if key in HONOURED:
            continue
        where = at(path, key)
        if key in REFUSED:
            # Empty is absent: SGLang's newer frontends send `"stop_regex": []` on every call.
            same = SAME_AS_ABSENT.get(key, ())
            if any(value == v and type(value) is type(v) for v in same):
                continue
            if value is not None and value not in ([], "", {}):
                raise InvalidRequestField(where, REFUSED[key], describe(value), "unsupported_value")
            continue
        accepted = ", ".join((*HONOURED, *REFUSED))
        raise InvalidRequestField(
            where,
            f"a sampling parameter SGLang's SamplingParams takes ({accepted})",
            f"the unknown key {key!r}",
            "unknown_parameter",
        )
    # HF's fast tokenizers (SGLang's, and ember's) decode the same either way: only its type
    # is checked.
    optional_bool(params, "spaces_between_special_tokens", path, True)
