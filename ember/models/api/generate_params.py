"""Which keys ``/generate``'s ``sampling_params`` may hold.

SGLang builds ``SamplingParams(**sampling_params)``, so a key it does not know fails the request;
ember used to drop such keys silently (``{"max_tokens": 4}`` ran SGLang's default 128 tokens).
Every key of SGLang's ``SamplingParams`` (python/sglang/srt/sampling/sampling_params.py) is
either honoured or refused by name with the reason; any other key is refused with the list of
accepted names.

SGLang builds its SamplingParams with the constructor of a msgspec Struct, which checks no
types (python/sglang/srt/sampling/sampling_params.py, tokenizer_manager.py
``_create_tokenized_object``): a flag is read by its truth (``ignore_eos: 0`` is false) and a
number by its value (``stream_interval: 1.0`` or ``true`` is one step). ember takes the JSON
values that mean one thing there (``sglang_flag``) and still refuses the rest by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at, describe, wrong_type
from ember.models.constrain.automata import Automata
from ember.models.constrain.regex_syntax import RegexError
from ember.models.constrain.stop_regex import (
    STOP_REGEX_DIALECT,
    STOP_REGEX_LIMIT,
    StopRegex,
    StopRegexBuild,
    StopRegexesTooLarge,
)

# SGLang's SamplingParams fields that ember honours (``seed``: ember's older spelling of
# ``sampling_seed``, kept so that bodies written for ember still run).
HONOURED = (
    "max_new_tokens",
    "min_new_tokens",
    "stop",
    "stop_token_ids",
    "stop_regex",
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
    "custom_params": "null (custom logit processors are not supported)",
    "stream_interval": (
        "null, 0 or 1 (a stream sends every engine step's tokens, which is what 1 asks for, "
        "and 0 or null the server's interval, also one step; an interval of N > 1 steps "
        "between chunks is not supported)"
    ),
}


def _one_or_zero(value: object) -> bool:
    """A JSON number (or boolean) SGLang reads as 1 or 0: ``1``, ``1.0``, ``true``, ``0``."""
    return isinstance(value, bool | int | float) and value in (0, 1)


# Values of a REFUSED key that ask for what ember does anyway. SGLang streams every
# ``stream_interval or server_interval`` steps (the server's is 1 unless launched otherwise):
# 1, 1.0 and true are one step; 0, 0.0 and false take the server's.
SAME_AS_ABSENT = {"stream_interval": _one_or_zero}

# SGLang reads these flags by truth; ember takes the two numbers that are plainly a flag.
FLAG_EXPECTED = "true or false (or SGLang's 0 or 1)"


def sglang_flag(params: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    """A ``sampling_params`` flag as SGLang reads it: true/false, or the numbers 0 and 1."""
    value = params.get(key)
    if value is None:
        return default
    if not _one_or_zero(value):
        raise wrong_type(at(path, key), FLAG_EXPECTED, value)
    return bool(value)


def stop_regexes(
    params: Mapping[str, Any], path: str, most: int, automata: Automata
) -> tuple[StopRegex, ...]:
    """SGLang's ``stop_regex``: one pattern or a list of them (null or [] for none), each
    compiled here into ember's automaton (``constrain/stop_regex.py``) within a budget of their
    own, then counted in the request's automaton budget, so that the engine's step thread never
    compiles and never backtracks."""
    value = params.get("stop_regex")
    if value is None:
        return ()
    where = at(path, "stop_regex")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > most:
        expected = f"a regular expression (a string) or an array of at most {most} of them"
        raise wrong_type(where, expected, value)
    build = StopRegexBuild(automata.cache)
    for i, item in enumerate(items):
        spot = where if isinstance(value, str) else at(where, i)
        if not isinstance(item, str):
            raise wrong_type(spot, "a regular expression (a string)", item)
        try:
            build.add(item, spot)
        except RegexError as error:
            raise InvalidRequestField(
                spot, STOP_REGEX_DIALECT, f"{error} in {item[:80]!r}", "unsupported_value"
            ) from None
        except StopRegexesTooLarge as error:
            raise InvalidRequestField(where, STOP_REGEX_LIMIT, error.got) from None
    automata.charge(build.work, where)  # the request's budget counts them too
    return tuple(build.compiled)


def check_sampling_keys(params: Mapping, path: str) -> None:
    """Refuse a key SGLang's SamplingParams does not have, and one ember cannot honour."""
    for key, value in params.items():
        if key in HONOURED:
            continue
        where = at(path, key)
        if key in REFUSED:
            same = SAME_AS_ABSENT.get(key)
            if same is not None and same(value):
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
    sglang_flag(params, "spaces_between_special_tokens", path, True)
