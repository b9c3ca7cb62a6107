"""Which request fields are compiled into automata or a grammar when the request is parsed.

Compiling a request's schemas is pure Python and may cost up to an automaton budget's worth of
CPU (about 1 s, ``constrain/automata.py``), so whoever parses a request on an event loop (the
model server's routes, the AI gateway on the supervisor) parses one that carries such a field
on a worker thread instead: the loop keeps answering every other request meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

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


async def parsed_off_loop(lane: Executor, body: object, parse: Callable[..., T], *args: Any) -> T:
    """``parse(*args)``: at once when ``body`` carries no schema, else on ``lane`` (one worker
    thread), so that the caller's event loop goes on serving others while the schemas compile.
    One thread, not asyncio's pool of up to 32: compiles hold the GIL, and the loop's share of
    it is one in (compiling threads + 1)."""
    if not carries_schemas(body):
        return parse(*args)
    return await asyncio.get_running_loop().run_in_executor(lane, parse, *args)
