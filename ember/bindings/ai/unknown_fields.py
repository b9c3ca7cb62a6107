"""A dev-console note for input fields that do nothing, so a typo does not fail in silence.

Workers AI's chat schema for Kimi and GLM accepts fields it does not know and ignores them, so
``max_token: 5`` (for ``max_tokens``) runs to the default length without a word; ember answers
the same way. vLLM logs the fields it ignored; the dev console gets one line naming each, and
the nearest field that works when one is close. Fields that do something in ember are the ones
the gateway forwards to a replica (``dialects.FORWARDED``) and the ones it reads itself; the
platform's fields ember accepts without effect (``store``, ``metadata``...) are not noted.
The options (``env.AI.run``'s third argument) get the same note for their unknown keys, and an
option among the inputs or an input field among the options is told where it belongs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from ember.bindings.ai.answer import AIAnswer
from ember.bindings.ai.dialects import FORWARDED
from ember.bindings.ai.openai_extras import GUIDED, IGNORED_HEADER, OPENAI_EXTRAS, RENAMED
from ember.bindings.ai.options import ALIASES as OPTION_ALIASES
from ember.bindings.ai.options import KNOWN as OPTION_KEYS
from ember.bindings.ai.thinking import IGNORED_SPELLINGS, ignored_thinking_fields
from ember.models.api.read_fields import STRUCTURED_OUTPUTS_READ

# Read by the gateway itself (the prompt form, raw prompts, LoRA, async batches, the echo).
READ_BY_GATEWAY = frozenset(
    {"prompt", "stream", "model", "raw", "lora", "requests", "request_id", "external_reference"}
)
# In the platform's schema, accepted by ember and without effect on a local model.
PLATFORM_WITHOUT_EFFECT = frozenset(
    {"store", "metadata", "modalities", "audio", "prediction", "web_search_options",
     "service_tier"}
)  # fmt: skip
KNOWN = frozenset(FORWARDED) | READ_BY_GATEWAY | PLATFORM_WITHOUT_EFFECT
# /ai/v1/chat/completions forwards vLLM's and SGLang's extras too (openai_extras.py).
OPENAI_KNOWN = KNOWN | frozenset(OPENAI_EXTRAS) | frozenset(RENAMED) | frozenset(GUIDED)


PROMPT_FIELDS = ("messages", "prompt")
# The options' names and their snake_case spellings (not those of options.gateway's keys).
OPTION_NAMES = frozenset(OPTION_KEYS) | {
    alias for alias, name in OPTION_ALIASES.items() if name in OPTION_KEYS
}
# Where the options go, in the words of both callers (the binding and a REST body).
THIRD_ARGUMENT = "the third argument of env.AI.run (a REST body's 'options' object)"


def ignored_fields(body: Mapping[str, Any]) -> list[str]:
    """The fields of an ``/ai/v1/chat/completions`` body no replica is sent, sorted (the
    thinking spellings among them; the platform's fields without effect are not), with the keys
    of ``structured_outputs`` that constrain nothing ember enforces (``whitespace_pattern``...),
    as the model server's log names them (``read_fields.ignored_note``)."""
    ignored = [str(key) for key in body if key not in OPENAI_KNOWN and key != "options"]
    structured = body.get("structured_outputs")
    if isinstance(structured, Mapping):
        ignored += [
            f"structured_outputs.{key}" for key in structured if key not in STRUCTURED_OUTPUTS_READ
        ]
    return sorted(ignored)


def with_ignored_fields(answer: AIAnswer, body: Mapping[str, Any]) -> AIAnswer:
    """``answer`` naming ``body``'s ignored fields in its ``x-ember-ignored-fields`` header."""
    ignored = ignored_fields(body)
    if ignored:
        answer.headers[IGNORED_HEADER] = ignored_header_value(ignored)
    return answer


# The names a header may carry as they are: the keys are the caller's, and a key with CR/LF or a
# character latin-1 lacks would break the answer (a dropped connection, a 500) after the model ran.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
MAX_NAMED = 20  # a few thousand keys would make a header past clients' limits (Node: 16 KiB)


def ignored_header_value(ignored: list[str]) -> str:
    """The header's value: the plain names, at most ``MAX_NAMED``, and a count of the rest."""
    plain = [name for name in ignored if _PLAIN_NAME.fullmatch(name)]
    named = plain[:MAX_NAMED]
    rest = len(ignored) - len(named)
    return ", ".join(named + ([f"and {rest} more"] if rest else []))


def input_notes(model: str, inputs: Mapping[str, Any], dialect: str) -> list[str]:
    """The dev console's notes on ``inputs``: thinking spellings and fields that do nothing."""
    notes = (ignored_thinking_fields(model, inputs), unknown_fields_note(model, inputs, dialect))
    return [note for note in notes if note is not None]


def unknown_fields_note(
    model: str, inputs: Mapping[str, Any], dialect: str = "workers"
) -> str | None:
    """The note for ``inputs`` fields no part of ember reads (None when there are none); an
    option placed among the inputs (``rejectIfBusy``...) is told where it belongs. The
    thinking spellings have their own note (``thinking.py``)."""
    known = OPENAI_KNOWN if dialect == "openai" else KNOWN
    unknown = [key for key in inputs if key not in known and key not in IGNORED_SPELLINGS]
    if not unknown:
        return None
    options = [key for key in unknown if key in OPTION_NAMES or key == "options"]
    named = [_named(key, known) for key in unknown if key not in options]
    parts = []
    if named:
        parts.append(
            f"ignored {', '.join(named)}: not a field of Workers AI's chat input "
            "(the platform ignores unknown fields too)"
        )
    if options:
        listed = ", ".join(f"'{key}'" for key in options)
        parts.append(
            f"ignored {listed} in the inputs: options are read only from {THIRD_ARGUMENT}, "
            "so move them there"
        )
    return f"{model}: " + "; ".join(parts)


def unknown_options_note(model: str, unknown: tuple[str, ...]) -> str | None:
    """The note for ``options`` keys no part of ember reads (``RunOptions.unknown``); an input
    field placed among the options (``stream``...) is told where it belongs."""
    if not unknown:
        return None
    inputs = [key for key in unknown if key in KNOWN]
    named = [_named(key, OPTION_NAMES) for key in unknown if key not in inputs]
    parts = []
    if named:
        parts.append(
            f"ignored option {', '.join(named)}: not an option of {THIRD_ARGUMENT} "
            "(the platform ignores unknown options too)"
        )
    if inputs:
        listed = ", ".join(f"'{key}'" for key in inputs)
        parts.append(
            f"ignored {listed} in the options: input fields go in the inputs (the second "
            "argument of env.AI.run, a REST body's top level)"
        )
    return f"{model}: " + "; ".join(parts)


def misspelt_prompt(inputs: Mapping[str, Any]) -> str | None:
    """``"'message': did you mean 'messages'?"`` for inputs with neither ``messages`` nor
    ``prompt`` but a key close to one (None otherwise): the schema's error alone ("got
    neither") sent users looking for what they had typed."""
    if any(key in inputs for key in ("messages", "prompt", "requests", "request_id")):
        return None
    for key in inputs:
        near = difflib.get_close_matches(str(key).lower(), PROMPT_FIELDS, n=1, cutoff=0.75)
        if near:
            return f"'{key}': did you mean '{near[0]}'?"
    return None


def _named(key: str, known: frozenset[str]) -> str:
    """``'key'``, with the nearest known name when one is close (case aside: rejectifbusy)."""
    lowered = {name.lower(): name for name in known}
    near = difflib.get_close_matches(key.lower(), sorted(lowered), n=1, cutoff=0.75)
    return f"'{key}' (did you mean '{lowered[near[0]]}'?)" if near else f"'{key}'"
