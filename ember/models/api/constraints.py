"""From a validated request to what the engine and the response builder need: the grammar
spec (``None`` when generation is free) and the output parser, both for the model's family."""

from __future__ import annotations

from collections.abc import Sequence

from ember.models.api.chat_request import ChatRequest
from ember.models.api.output_parser import ChatOutputParser, random_call_id
from ember.models.api.tool_streams import IdFactory, Undeclared
from ember.models.api.tool_values import JsonBranches
from ember.models.constrain.session import ConstraintSpec
from ember.models.constrain.tool_grammars import (
    ReasoningPrefix,
    ToolFormat,
    check_glm_arguments,
)


def constraint_for(
    request: ChatRequest, *, tool_format: ToolFormat, reasoning: ReasoningPrefix
) -> ConstraintSpec | None:
    """The grammar for this request, or None when nothing constrains the output.

    - tool_choice ``required`` or a named function: only tool calls in the family's syntax
      (a named function: exactly one call to it), arguments matching the tool's schema;
    - ``response_format`` json_object / json_schema: JSON (with tool_choice ``auto`` and
      tools declared: JSON or tool calls);
    - tool_choice ``auto`` with a ``strict`` tool (and no JSON format): content, or content then
      tool calls whose arguments match their schemas, as OpenAI guarantees for strict tools
      (vLLM likewise constrains auto calls only when a tool is strict);
    - ``regex`` (SGLang's, vLLM's ``structured_outputs.regex``): text matching it in full;
    - a ``<think>`` block comes first when thinking is on (``reasoning``).
    """
    if request.regex is not None:
        # Only the regex, as SGLang: tool calls may not be forced beside it (refused when
        # parsed), and unforced ones are not part of its grammar.
        return ConstraintSpec(regex=request.regex, reasoning=reasoning)
    tools = tuple(t.signature() for t in request.active_tools)
    required = request.tool_choice.mode == "required" and bool(tools)
    fmt = request.response_format
    json_kind = None
    if fmt.type == "json_object" or (fmt.type == "json_schema" and fmt.schema is None):
        json_kind = "object"
    elif fmt.type == "json_schema":
        json_kind = "schema"
    text = request.tool_choice.mode == "auto" and any(t.strict for t in tools)
    if json_kind is None and not required and not text:
        return None
    if tools and tool_format != "kimi":
        # The engine builds the grammar in its own thread, where a refused schema fails the
        # whole step: what only GLM's raw string values refuse is checked here, by the
        # request's own tool index: forced calls' tools, and strict ones (OpenAI checks only
        # strict tools' schemas; unforced, a hint's arguments GLM cannot follow are left free
        # in the grammar, glm_tool_calls).
        active = {t.name for t in request.active_tools}
        # The request's budget from parsing (one per request, automata.py): what its JSON
        # checks built is reused, and what only GLM builds is counted with the rest.
        budget = request.automata
        for i, tool in enumerate(request.tools):
            signature = tool.signature()
            if tool.name in active and (signature.strict or required):
                check_glm_arguments(signature, f"/tools/{i}/function/parameters", budget)
    return ConstraintSpec(
        json=None if required else json_kind,
        schema=fmt.schema if json_kind == "schema" and not required else None,
        schema_strict=fmt.strict,
        tools=tools,
        tools_required=required,
        text=text and json_kind is None,
        tool_format=tool_format,
        parallel_tool_calls=request.parallel_tool_calls and request.tool_choice.forced_name is None,
        reasoning=reasoning,
        # Only Kimi's ids carry the count; other families share one compiled grammar.
        first_call_index=history_call_count(request) if tool_format == "kimi" else 0,
    )


def history_call_count(request: ChatRequest) -> int:
    """Tool calls the assistant turns of the history made (SGLang's history_tool_calls_cnt)."""
    return sum(len(m.tool_calls) for m in request.messages if m.role == "assistant")


def output_parser_for(
    request: ChatRequest,
    *,
    tool_format: ToolFormat,
    reasoning: ReasoningPrefix,
    id_factory: IdFactory = random_call_id,
    drop: Sequence[str] = (),
    on_undeclared: Undeclared | None = None,
    branches: JsonBranches | None = None,
) -> ChatOutputParser:
    """The parser for this request's output (tool calls parsed only when tools are active);
    ``drop``: the special-token markers it must keep from the client; ``on_undeclared``: told
    each call dropped for naming no declared tool (``ChatOutputParser``); ``branches``: the
    request's, for each of its choices' parsers (GLM's typing of "either" values)."""
    tools = {t.name: t.parameters for t in request.active_tools} or None
    return ChatOutputParser(
        tool_format,
        tools=tools,
        reasoning=reasoning,
        id_factory=id_factory,
        drop=drop,
        on_undeclared=on_undeclared,
        branches=branches,
    )
