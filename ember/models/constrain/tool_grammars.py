"""Grammars for the two families' tool-call syntax, and the reasoning block before any grammar.

Kimi K2 (arguments are JSON matching the tool's parameters)::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>
    {...}<|tool_call_end|>...<|tool_calls_section_end|>

GLM-4.7 / GLM-5 (``glm47``; GLM-4.5/4.6, ``glm45``, puts a newline after the name and after
every key and value, and before each call). String-typed values are raw text that keeps the
string schema (``string_schema.raw_string_node``), every other value is JSON::

    <tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>

Markers resolve to the tokenizer's special tokens when it has them (see ``Marker``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal as TypingLiteral

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automata import Automata, AutomatonBudgetExceeded
from ember.models.constrain.json_nodes import JLiteralSet
from ember.models.constrain.nodes import (
    Choice,
    Literal,
    Marker,
    Node,
    Repeat,
    Seq,
    Whitespace,
)
from ember.models.constrain.schema import DEFAULT_WHITESPACE, compile_schema
from ember.models.constrain.schema_check import KNOWN_GLM_ARGUMENTS, check_schema, schema_key
from ember.models.constrain.schema_depth import check_depth
from ember.models.constrain.string_schema import raw_string_node
from ember.models.constrain.tool_nodes import GlmArguments, IndexedRepeat
from ember.models.constrain.tool_root import (
    arguments_object,
    dereference,
    raw_members,
    value_form,
    value_kinds,
)

ToolFormat = TypingLiteral["kimi", "glm45", "glm47"]
ReasoningPrefix = TypingLiteral["off", "inside", "optional"]
MAX_PARALLEL_CALLS = 16

KIMI_SECTION_BEGIN = "<|tool_calls_section_begin|>"
KIMI_SECTION_END = "<|tool_calls_section_end|>"
KIMI_CALL_BEGIN = "<|tool_call_begin|>"
KIMI_ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
KIMI_CALL_END = "<|tool_call_end|>"
GLM_CALL_BEGIN = "<tool_call>"
GLM_CALL_END = "</tool_call>"
GLM_KEY_BEGIN = "<arg_key>"
GLM_KEY_END = "</arg_key>"
GLM_VALUE_BEGIN = "<arg_value>"
GLM_VALUE_END = "</arg_value>"
THINK_BEGIN = "<think>"
THINK_END = "</think>"
KIMI_MARKERS = (
    KIMI_SECTION_BEGIN,
    KIMI_SECTION_END,
    KIMI_CALL_BEGIN,
    KIMI_ARGUMENT_BEGIN,
    KIMI_CALL_END,
)
GLM_MARKERS = (
    GLM_CALL_BEGIN,
    GLM_CALL_END,
    GLM_KEY_BEGIN,
    GLM_KEY_END,
    GLM_VALUE_BEGIN,
    GLM_VALUE_END,
)


def family_markers(tool_format: ToolFormat) -> tuple[str, ...]:
    """The tool-call markers a text parser splits on, which free text must never spell."""
    return KIMI_MARKERS if tool_format == "kimi" else GLM_MARKERS


@dataclass(frozen=True)
class ToolSignature:
    """What the grammar needs of a function tool: its name and parameters schema, and
    ``strict`` (OpenAI's ``function.strict``): its schema is compiled strictly, every keyword
    enforced or refused, where a tool's is otherwise a hint ember enforces what it can of."""

    name: str
    parameters: Mapping | None = None
    strict: bool = False


def _arguments_schema(tool: ToolSignature) -> Mapping:
    return tool.parameters if tool.parameters is not None else {"type": "object", "properties": {}}


def _compile_arguments(tool: ToolSignature, path: str, ws: int, automata: Automata) -> Node:
    return compile_schema(
        _arguments_schema(tool),
        path=path,
        strict=tool.strict,
        ws=ws,
        forbidden=KIMI_MARKERS,
        automata=automata,
    )


def kimi_tool_calls(
    tools: Sequence[ToolSignature],
    marker: Marker,
    *,
    parallel: bool,
    path: str = "/tools",
    ws: int = DEFAULT_WHITESPACE,
    first_index: int = 0,
    automata: Automata | None = None,
) -> Node:
    """``first_index``: the number of tool calls already in the conversation; Kimi numbers
    calls across turns (SGLang's ``history_tool_calls_cnt + tool_index``), so a forced call
    after earlier ones never repeats an id the client's tool loop already holds.
    ``automata``: the request's automaton budget, which every tool's arguments draw on."""
    automata = Automata() if automata is None else automata
    arguments = {
        t.name: _compile_arguments(t, f"{path}/{i}/function/parameters", ws, automata)
        for i, t in enumerate(tools)
    }

    def call(index: int) -> Node:
        return Seq(
            [
                marker(KIMI_CALL_BEGIN),
                Choice(
                    [
                        Seq(
                            [
                                Literal(f"functions.{t.name}:{first_index + index}".encode()),
                                marker(KIMI_ARGUMENT_BEGIN),
                                arguments[t.name],
                            ]
                        )
                        for t in tools
                    ]
                ),
                marker(KIMI_CALL_END),
            ]
        )

    most = MAX_PARALLEL_CALLS if parallel else 1
    return Seq([marker(KIMI_SECTION_BEGIN), IndexedRepeat(call, 1, most), marker(KIMI_SECTION_END)])


@dataclass(frozen=True)
class _Root:
    """The tool's whole parameters schema and its path: ``$ref``s resolve against it.
    ``automata``: the request's regexes and their budget, shared by every value of every
    tool (as the JSON path's compiles share them): a pattern repeated by many properties is
    built once, and all of them together stay within ``MAX_AUTOMATON_WORK`` (review33 #1)."""

    schema: object
    path: str
    strict: bool
    automata: Automata


def _glm_value(schema: object, marker: Marker, path: str, ws: int, root: _Root) -> Node:
    """One ``<arg_value>`` body plus its closing marker. A string is raw text that keeps the
    string schema (length, pattern, format) and never spells a marker; anything else is JSON."""
    end = marker(GLM_VALUE_END)
    schema, path = dereference(schema, root.schema, path, root.path)

    def raw_value(sub: Mapping) -> Node:
        return raw_string_node(
            sub,
            path,
            marker=marker,
            terminator=GLM_VALUE_END,
            forbidden=GLM_MARKERS,
            strict=root.strict,
            automata=root.automata,
        )

    def json_value(sub: object) -> Node:
        node = compile_schema(
            sub,
            path=path,
            strict=root.strict,
            ws=ws,
            forbidden=GLM_MARKERS,
            within=(root.schema, root.path),
            automata=root.automata,
        )
        return Seq([node, end])

    # The output parser types each value by the same form (tool_values.convert_glm_value),
    # and an "either" value as JSON exactly where this JSON branch takes its text.
    form = value_form(schema)
    if not isinstance(schema, Mapping):
        # true is any value; false is none, refused as the JSON path refuses it.
        return Choice([json_value(schema), raw_value({})])
    members = raw_members(schema)
    if form == "raw" and members is not None:
        if not members:  # no string member: refused as the JSON path refuses it
            return json_value(schema)
        return Seq([JLiteralSet([v.encode() for v in members]), end])
    if form == "raw":
        return raw_value(schema)
    if form == "either":
        kinds = value_kinds(schema)
        json = json_value(schema)  # refuses malformed bounds as the JSON path does
        if members is not None:
            # enum/const: raw text only for the string members, the rest as JSON (which also
            # spells the strings quoted, as the JSON path does: still a member).
            if not members:
                return json
            return Choice([Seq([JLiteralSet([v.encode() for v in members]), end]), json])
        try:
            raw = raw_value(schema)
        except AutomatonBudgetExceeded:
            raise  # the request's error: no branch may skip the budget
        except InvalidRequestField:
            # No string the pattern allows avoids spelling a marker, so the string branch can
            # never be taken; the value's other types still can (only a type of exactly
            # "string" makes such a pattern the request's error).
            others = [kind for kind in kinds if kind != "string"]
            return json_value({**schema, "type": others})
        return Choice([raw, json])
    return json_value(schema)


def _glm_arguments(
    tool: ToolSignature,
    marker: Marker,
    path: str,
    ws: int,
    newline: list[Node],
    automata: Automata,
) -> Node:
    """One call's key/value pairs; ``path``: the tool's ``parameters`` in the request. Each
    value is compiled against the whole parameters (a ``$ref`` to ``#/$defs/...``), and a root
    ``$ref`` is followed to the object whose properties the pairs are. The tool's values share
    one automaton budget with the request's other tools (``automata``), as on the JSON path."""
    root = _Root(_arguments_schema(tool), path, tool.strict, automata)
    if tool.strict:
        # GLM compiles each property on its own, so the keywords beside them (minProperties,
        # not or allOf of two at the root; anyOf beside a string's type) would be skipped:
        # strict refuses what the JSON path refuses (Kimi, response_format), by the same check.
        check_schema(root.schema, path=path, strict=True)
    schema, where = arguments_object(tool.parameters, path)
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    pairs = []
    for name, sub in properties.items():
        pairs.append(
            Seq(
                [
                    marker(GLM_KEY_BEGIN),
                    Literal(name.encode()),
                    marker(GLM_KEY_END),
                    *newline,
                    marker(GLM_VALUE_BEGIN),
                    _glm_value(sub, marker, f"{where}/properties/{name}", ws, root),
                    *newline,
                ]
            )
        )
    return GlmArguments(pairs, [name in required for name in properties])


def _any_glm_arguments(marker: Marker, newline: list[Node]) -> Node:
    """Any key/value pairs, as raw text that spells no marker."""
    key = raw_string_node(
        {}, "", marker=marker, terminator=GLM_KEY_END, forbidden=GLM_MARKERS, strict=False
    )
    value = raw_string_node(
        {}, "", marker=marker, terminator=GLM_VALUE_END, forbidden=GLM_MARKERS, strict=False
    )
    pair = Seq([marker(GLM_KEY_BEGIN), key, *newline, marker(GLM_VALUE_BEGIN), value, *newline])
    return Repeat(pair)


def check_glm_arguments(
    tool: ToolSignature,
    path: str,
    automata: Automata | None = None,
    ws: int = DEFAULT_WHITESPACE,
) -> None:
    """Compile ``tool``'s GLM arguments, so that a schema only GLM's raw values refuse (a
    pattern whose every match spells a marker) is an ``InvalidRequestField`` naming ``path``
    (the tool's ``parameters``) while the request is read: the engine builds the grammar in
    its own thread, where an error fails the whole step. ``automata``: the request's budget.
    Once per distinct schema (``KNOWN_GLM_ARGUMENTS``), reusing what the request's JSON check
    of it built, and charging the states of the regexes that check did not need (review35)."""
    schema = _arguments_schema(tool)
    budget = Automata() if automata is None else automata

    def build(own: Automata) -> int:
        # The JSON check's automata, charged while the request was parsed: built then (kept in
        # the request's budget), or again here, uncounted, when that check was a known one.
        warm = Automata(sys.maxsize, cache=budget.cache)
        warm.adopt(budget)
        try:
            compile_schema(schema, path=path, strict=tool.strict, automata=warm)
        except AutomatonBudgetExceeded:
            raise  # unlimited here, so a compile past its time limit: GLM's would be too
        except InvalidRequestField:
            pass  # parsing refuses it; GLM's own compile, next, names what GLM refuses
        own.adopt(warm)
        _glm_arguments(tool, Marker({}), path, ws, [], own)
        # By regex, not by states built: the same whether the JSON check compiled in this
        # request or was known from an earlier one.
        return own.states_of(own.used - warm.used)

    check_depth(schema, path)  # before schema_key's json.dumps, which recurses per level
    key = schema_key(schema, tool.strict, b"glm%d" % ws)
    KNOWN_GLM_ARGUMENTS.known(key, path=path, budget=budget, build=build)
    if automata is None:  # no request's parsing charged the JSON check's states: here, then
        check_schema(schema, path=path, strict=tool.strict, budget=budget)


def glm_tool_calls(
    tools: Sequence[ToolSignature],
    marker: Marker,
    *,
    parallel: bool,
    dialect: ToolFormat,
    path: str = "/tools",
    ws: int = DEFAULT_WHITESPACE,
    forced: bool = True,
    automata: Automata | None = None,
) -> Node:
    """``forced``: the calls are required (tool_choice ``required`` or named); otherwise a
    tool that is not strict, whose arguments GLM's pairs cannot follow, has free arguments.
    ``automata``: the request's budget, drawn on by the tools the request was checked for
    (``check_glm_arguments``: strict or forced ones); the unchecked hints share one more, so
    that a hint's patterns never use up what a checked tool was accepted with."""
    automata = Automata() if automata is None else automata
    hints = Automata()
    newline = [Literal(b"\n")] if dialect == "glm45" else []
    calls = []
    for i, tool in enumerate(tools):
        budget = automata if tool.strict or forced else hints
        try:
            arguments = _glm_arguments(
                tool, marker, f"{path}/{i}/function/parameters", ws, newline, budget
            )
        except InvalidRequestField:
            if tool.strict or forced:  # refused while the request was read (constraints.py)
                raise
            # Unforced, a tool that is not strict is a hint (OpenAI checks only strict tools'
            # schemas): arguments GLM's pairs cannot follow (a root anyOf) are left free.
            arguments = _any_glm_arguments(marker, newline)
        calls.append(Seq([Literal(tool.name.encode()), *newline, arguments]))
    one_call = Seq([Whitespace(2), marker(GLM_CALL_BEGIN), Choice(calls), marker(GLM_CALL_END)])
    return IndexedRepeat(lambda _: one_call, 1, MAX_PARALLEL_CALLS if parallel else 1)


def tool_calls_grammar(
    tools: Sequence[ToolSignature],
    marker: Marker,
    *,
    tool_format: ToolFormat,
    parallel: bool,
    ws: int = DEFAULT_WHITESPACE,
    first_index: int = 0,
    forced: bool = True,
    automata: Automata | None = None,
) -> Node:
    """``automata``: the request's automaton budget (None: one of the calls' own)."""
    if tool_format == "kimi":
        return kimi_tool_calls(
            tools,
            marker,
            parallel=parallel,
            ws=ws,
            first_index=first_index,
            automata=automata,
        )
    return glm_tool_calls(
        tools,
        marker,
        parallel=parallel,
        dialect=tool_format,
        ws=ws,
        forced=forced,
        automata=automata,
    )
