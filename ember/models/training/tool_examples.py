"""Tool-use conversations grounded in the corpus, so the models learn each family's call format.

Four tools look things up in the standard library itself; their results are computed from the
corpus, so every conversation is true to the data: user asks, assistant calls a tool (sometimes
two in parallel), the tool answers, the assistant answers from the result. Some conversations
offer tools the assistant does not need and answers directly.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ember.models.training.corpus import SourceFile
from ember.models.training.functions import (
    DocumentedFunction,
    module_docstring,
    module_name,
    public_functions,
)
from ember.models.training.instructions import (
    ChatExample,
    Message,
    code_block,
    instruction_example,
    maybe_system,
    rng_for,
)


def _tool(name: str, description: str, params: dict[str, str], required: list[str]) -> Message:
    properties = {k: {"type": t} for k, t in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


GET_SOURCE = _tool(
    "get_source",
    "Return the source code of a function in the Python standard library.",
    {"module": "string", "name": "string"},
    ["module", "name"],
)
LIST_FUNCTIONS = _tool(
    "list_functions",
    "List the public functions and classes that a standard-library module defines.",
    {"module": "string", "limit": "integer"},
    ["module"],
)
SEARCH_DOCS = _tool(
    "search_docs",
    "Search the docstrings of the Python standard library.",
    {"query": "string"},
    ["query"],
)
READ_FILE = _tool(
    "read_file",
    "Read the first lines of a file of the Python standard library.",
    {"path": "string", "max_lines": "integer"},
    ["path"],
)
ALL_TOOLS = (GET_SOURCE, LIST_FUNCTIONS, SEARCH_DOCS, READ_FILE)


def _offered(rng: random.Random, needed: Message) -> tuple[Message, ...]:
    """The needed tool plus 0-2 others, in a fixed overall order."""
    others = [t for t in ALL_TOOLS if t is not needed]
    chosen = {id(needed), *(id(t) for t in rng.sample(others, rng.randrange(3)))}
    return tuple(t for t in ALL_TOOLS if id(t) in chosen)


def _call(index: int, name: str, arguments: dict[str, Any]) -> Message:
    return {
        "id": f"functions.{name}:{index}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _conversation(
    rng: random.Random,
    tools: tuple[Message, ...],
    user: str,
    calls: Sequence[Message],
    results: Sequence[str],
    answer: str,
    reasoning: str,
) -> ChatExample:
    thinking = rng.random() < 0.5
    call_turn: Message = {"role": "assistant", "content": "", "tool_calls": list(calls)}
    target: Message = {"role": "assistant", "content": answer}
    if thinking:
        call_turn["reasoning_content"] = reasoning
        target["reasoning_content"] = "The tool answered; I can reply now."
    tool_turns = [
        {"role": "tool", "tool_call_id": call["id"], "content": result}
        for call, result in zip(calls, results, strict=True)
    ]
    prefix = (*maybe_system(rng, 0.2), {"role": "user", "content": user}, call_turn, *tool_turns)
    return ChatExample(prefix=prefix, target=target, tools=tools, thinking=thinking)


def source_lookup(fn: DocumentedFunction, seed: int) -> ChatExample:
    rng = rng_for("get_source", f"{fn.module}.{fn.qualname}", seed)
    full = f"{fn.module}.{fn.qualname}"
    user = rng.choice(
        (
            f"Show me the source of `{full}`.",
            f"How is `{fn.qualname}` in `{fn.module}` implemented?",
            f"Look up `{full}` for me.",
        )
    )
    call = _call(0, "get_source", {"module": fn.module, "name": fn.qualname})
    answer = f"Here is `{full}`:\n\n{code_block(fn.source)}"
    reasoning = f"I need the source of `{full}`; get_source returns it."
    tools = _offered(rng, GET_SOURCE)
    return _conversation(rng, tools, user, [call], [fn.source], answer, reasoning)


def parallel_lookup(a: DocumentedFunction, b: DocumentedFunction, seed: int) -> ChatExample:
    rng = rng_for("get_source2", f"{a.module}.{a.qualname}+{b.qualname}", seed)
    user = f"Show me `{a.module}.{a.qualname}` and `{b.module}.{b.qualname}`."
    calls = [
        _call(0, "get_source", {"module": a.module, "name": a.qualname}),
        _call(1, "get_source", {"module": b.module, "name": b.qualname}),
    ]
    answer = (
        f"`{a.qualname}`:\n\n{code_block(a.source)}\n\n`{b.qualname}`:\n\n{code_block(b.source)}"
    )
    reasoning = "Two functions: I will fetch both sources at once."
    tools = _offered(rng, GET_SOURCE)
    return _conversation(rng, tools, user, calls, [a.source, b.source], answer, reasoning)


def module_listing(source: SourceFile, seed: int) -> ChatExample | None:
    names = public_functions(source)
    if len(names) < 3:
        return None
    module = module_name(source.path)
    rng = rng_for("list_functions", module, seed)
    limit = rng.choice((5, 10, 20))
    shown = names[:limit]
    user = rng.choice((f"What does the `{module}` module define?", f"List the API of `{module}`."))
    call = _call(0, "list_functions", {"module": module, "limit": limit})
    answer = f"`{module}` defines: " + ", ".join(f"`{n}`" for n in shown) + "."
    reasoning = f"list_functions can list what `{module}` defines."
    tools = _offered(rng, LIST_FUNCTIONS)
    return _conversation(rng, tools, user, [call], [json.dumps(shown)], answer, reasoning)


def file_peek(source: SourceFile, seed: int) -> ChatExample | None:
    doc = module_docstring(source)
    if not doc:
        return None
    rng = rng_for("read_file", source.path, seed)
    max_lines = rng.choice((10, 20))
    head = "\n".join(source.text.splitlines()[:max_lines])
    user = rng.choice(
        (f"What is `{source.path}` about?", f"Open `{source.path}` and tell me what it does.")
    )
    call = _call(0, "read_file", {"path": source.path, "max_lines": max_lines})
    answer = f"`{source.path}`: {doc}"
    reasoning = f"Reading the top of `{source.path}` will show its docstring."
    tools = _offered(rng, READ_FILE)
    return _conversation(rng, tools, user, [call], [head], answer, reasoning)


def doc_search(word: str, hits: Sequence[DocumentedFunction], seed: int) -> ChatExample:
    rng = rng_for("search_docs", word, seed)
    lines = [f"{h.module}.{h.qualname}: {h.request}" for h in hits[:3]]
    user = rng.choice(
        (f"Which standard-library function deals with {word}?", f"Find something about {word}.")
    )
    call = _call(0, "search_docs", {"query": word})
    best = hits[0]
    answer = f"`{best.module}.{best.qualname}`: {best.request}"
    reasoning = f"search_docs with the query {word!r} should find it."
    tools = _offered(rng, SEARCH_DOCS)
    return _conversation(rng, tools, user, [call], ["\n".join(lines)], answer, reasoning)


def _search_index(functions: Sequence[DocumentedFunction]) -> dict[str, list[DocumentedFunction]]:
    index: dict[str, list[DocumentedFunction]] = defaultdict(list)
    for fn in functions:
        for word in {w.strip(".,:;()`'\"").lower() for w in fn.request.split()}:
            if len(word) >= 7 and word.isalpha():
                index[word].append(fn)
    return {w: hits for w, hits in index.items() if 2 <= len(hits) <= 12}


def tool_examples(
    files: Sequence[SourceFile], functions: Sequence[DocumentedFunction], seed: int
) -> list[ChatExample]:
    """All tool conversations, in a deterministic order (by kind, then by corpus order)."""
    out: list[ChatExample] = [source_lookup(fn, seed) for fn in functions[::8]]
    out += [
        parallel_lookup(a, b, seed)
        for a, b in zip(functions[3::40], functions[4::40], strict=False)
    ]
    out += [ex for f in files if (ex := module_listing(f, seed)) is not None]
    out += [ex for f in files[1::2] if (ex := file_peek(f, seed)) is not None]
    index = _search_index(functions)
    out += [doc_search(w, index[w], seed) for w in sorted(index)[::3]]
    out += [
        instruction_example(
            fn, seed, tools=_offered(rng_for("no_call", fn.qualname, seed), GET_SOURCE)
        )
        for fn in functions[5::20]
    ]
    return out
