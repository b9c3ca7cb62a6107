"""Which request fields are compiled into automata or a grammar when the request is parsed.

Compiling a request's schemas is pure Python and may cost up to an automaton budget's worth of
CPU (about 1 s, ``constrain/automata.py``), so whoever parses a request on an event loop (the
model server's routes, the AI gateway on the supervisor) parses one that carries such a field
on a worker thread instead: the loop keeps answering every other request meanwhile
(``prompt_intake.taken_in``, ``bindings/ai/schema_lane.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

# OpenAI's, vLLM's guided/structured ones, SGLang's (in /generate's sampling_params too).
SCHEMA_FIELDS = frozenset(
    {
        "tools",
        "response_format",
        "guided_json",
        "guided_regex",
        "guided_choice",
        "guided_grammar",
        "structured_outputs",
        "regex",
        "json_schema",
        "ebnf",
        "stop_regex",  # /generate's: each pattern is an automaton (constrain/stop_regex.py)
    }
)


def carries_schemas(body: object) -> bool:
    """Whether the request body has a field whose value is compiled (``SCHEMA_FIELDS``), at
    its top or in ``sampling_params``, or a Responses ``text.format`` (its ``json_schema``)."""
    if not isinstance(body, Mapping):
        return False
    if any(body.get(name) is not None for name in SCHEMA_FIELDS):
        return True
    params = body.get("sampling_params")
    if isinstance(params, Mapping) and any(params.get(name) is not None for name in SCHEMA_FIELDS):
        return True
    text = body.get("text")
    return isinstance(text, Mapping) and text.get("format") is not None
