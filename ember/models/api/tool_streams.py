"""Incremental parsers for the tool-call sections of the two families' output.

Each one is handed the text after its start marker (``<|tool_calls_section_begin|>`` for Kimi,
``<tool_call>`` for GLM), consumes what it can, reports tool-call pieces, and says when its
section is over so the caller goes back to plain content. Nothing is released that could still
be the start of a marker. Invalid calls (a Kimi id that names no function, a GLM call without
a name) are dropped, as SGLang and vLLM do; so is a call to a function the request did not
declare (SGLang's "undefined function" rule: a tool loop that looks the name up must never get
it), text and all, reported through ``on_undeclared`` so the server can log it. Arguments that
are not valid JSON are passed on as written (OpenAI's ``arguments`` may be invalid JSON too).

Kimi's arguments are JSON already and stream as they arrive. GLM's are built from key/value
pairs typed by the tool's schema. A value the schema makes a string streams as it arrives, as
vLLM's GLM-4.5/4.7 parser streams it (``{"city":"Pa``, ``ris"``): its text is the string as
written, so each piece is final once escaped; a value of another type streams whole, once its
``</arg_value>`` came (``,"days":3``: ``3`` could still become ``30``, ``null`` be a string).
A string value the call ends inside (``</tool_call>`` before ``</arg_value>``) is closed as it
stands, as vLLM's streaming parser closes it: its text has been sent already. The pieces
always add up to the ``arguments`` string the whole text gives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

from ember.models.api.deltas import DeltaMessage, ToolCallDelta
from ember.models.api.text_stream import TrimmedSegment, find_first, safe_length
from ember.models.api.tool_values import (
    JsonBranches,
    convert_glm_value,
    glm_arguments_json,
    glm_value_form,
    parameter_schema,
    parse_kimi_call_id,
    value_types,
)
from ember.models.constrain.tool_grammars import (
    GLM_CALL_BEGIN,
    GLM_CALL_END,
    GLM_KEY_BEGIN,
    GLM_KEY_END,
    GLM_VALUE_BEGIN,
    GLM_VALUE_END,
    KIMI_ARGUMENT_BEGIN,
    KIMI_CALL_BEGIN,
    KIMI_CALL_END,
    KIMI_SECTION_BEGIN,
    KIMI_SECTION_END,
)

IdFactory = Callable[[], str]
Undeclared = Callable[[str], None]  # told the name of each call dropped as undeclared


def _ignore(name: str) -> None:
    pass


class KimiToolStream:
    start_marker = KIMI_SECTION_BEGIN
    markers = (
        KIMI_SECTION_BEGIN,
        KIMI_SECTION_END,
        KIMI_CALL_BEGIN,
        KIMI_ARGUMENT_BEGIN,
        KIMI_CALL_END,
    )

    def __init__(
        self,
        parameters: Mapping[str, Mapping | None],
        id_factory: IdFactory,
        on_undeclared: Undeclared = _ignore,
    ) -> None:
        self.names = list(parameters)
        self.on_undeclared = on_undeclared
        self.count = 0
        self.state = "section"
        self.emitting = False
        self.arguments = TrimmedSegment()

    def feed(self, buf: str, out: DeltaMessage, final: bool) -> tuple[str, bool]:
        while True:
            if self.state == "section":
                hit = find_first(buf, (KIMI_CALL_BEGIN, KIMI_SECTION_END))
                if hit is None:  # text between calls carries nothing
                    return ("" if final else buf[safe_length(buf, self.markers) :]), final
                index, marker = hit
                buf = buf[index + len(marker) :]
                if marker == KIMI_SECTION_END:
                    return buf, True
                self.state = "id"
            elif self.state == "id":
                hit = find_first(buf, (KIMI_ARGUMENT_BEGIN, KIMI_CALL_END, KIMI_SECTION_END))
                if hit is None:
                    return ("", True) if final else (buf, False)
                index, marker = hit
                if marker != KIMI_ARGUMENT_BEGIN:
                    self.state = "section"  # a call without arguments: drop it
                    continue
                raw_id, buf = buf[:index].strip(), buf[index + len(marker) :]
                name = parse_kimi_call_id(raw_id, self.names)
                if name is not None and name not in self.names:
                    self.on_undeclared(name)
                    name = None
                self.emitting = name is not None
                if name is not None:
                    out.add_tool_piece(ToolCallDelta(self.count, raw_id, name, ""))
                self.arguments = TrimmedSegment()
                self.state = "args"
            else:  # args
                hit = find_first(buf, (KIMI_CALL_END, KIMI_SECTION_END))
                end = (
                    hit[0]
                    if hit is not None
                    else (len(buf) if final else safe_length(buf, self.markers))
                )
                text = self.arguments.push(buf[:end])
                if self.emitting and text:
                    out.add_tool_piece(ToolCallDelta(self.count, arguments=text))
                if hit is None:
                    return buf[end:], final
                index, marker = hit
                buf = buf[index + len(marker) :]
                if self.emitting:
                    self.count += 1
                self.state = "section"
                if marker == KIMI_SECTION_END:
                    return buf, True


_GLM_PAIR = re.compile(
    re.escape(GLM_KEY_BEGIN)
    + r"(.*?)"
    + re.escape(GLM_KEY_END)
    + r"\s*"
    + re.escape(GLM_VALUE_BEGIN)
    + r"(.*?)"
    + re.escape(GLM_VALUE_END),
    re.DOTALL,
)


# A pair's start, up to its value's first character: where a string value starts streaming.
_GLM_PAIR_HEAD = re.compile(
    re.escape(GLM_KEY_BEGIN)
    + r"(.*?)"
    + re.escape(GLM_KEY_END)
    + r"\s*"
    + re.escape(GLM_VALUE_BEGIN),
    re.DOTALL,
)
_GLM_VALUE_ENDS = (GLM_VALUE_END, GLM_CALL_END)


def _json_text(text: str) -> str:
    """``text`` as it reads inside a JSON string (escaped one character at a time, so pieces
    escaped apart add up to the whole escaped at once)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


class GlmToolStream:
    start_marker = GLM_CALL_BEGIN
    markers = (
        GLM_CALL_BEGIN,
        GLM_CALL_END,
        GLM_KEY_BEGIN,
        GLM_KEY_END,
        GLM_VALUE_BEGIN,
        GLM_VALUE_END,
    )

    def __init__(
        self,
        parameters: Mapping[str, Mapping | None],
        id_factory: IdFactory,
        on_undeclared: Undeclared = _ignore,
        branches: JsonBranches | None = None,
    ) -> None:
        """``branches``: the request's (shared by its choices), else this parser's own."""
        self.parameters = parameters
        self.on_undeclared = on_undeclared
        self.id_factory = id_factory
        self.branches = JsonBranches() if branches is None else branches
        self.count = 0
        self.state = "name"
        self.name = ""
        self.pairs = 0

    def _close(self, out: DeltaMessage) -> None:
        out.add_tool_piece(ToolCallDelta(self.count, arguments="}" if self.pairs else "{}"))
        self.count += 1

    def _cut(self, out: DeltaMessage, pair: str = "") -> tuple[str, bool]:
        """The output ended inside a call (cut by max_tokens): its arguments stay as far as they
        got, unclosed (``{"city":"Par``, or empty), as OpenAI's do when ``finish_reason`` is
        ``length``; closing them would make up a call the model never finished (``{}`` that
        misses the schema's required keys). ``pair``: the text of the pair it ended in, from
        its ``<arg_key>``, sent as far as it was generated (vLLM streams it as parsed)."""
        if pair:
            piece = ("," if self.pairs else "{") + self._partial_pair(pair)
            out.add_tool_piece(ToolCallDelta(self.count, arguments=piece))
        self.count += 1
        self.state = "name"
        return "", True

    def _partial_pair(self, text: str) -> str:
        """A pair cut short as the JSON it would have started (``"city":"Par``): the key, then
        the value quoted unless the schema admits no string (then as written: ``12``)."""
        rest = text[len(GLM_KEY_BEGIN) :]
        key_end = rest.find(GLM_KEY_END)
        if key_end < 0:
            return json.dumps(rest, ensure_ascii=False)[:-1]
        key, rest = rest[:key_end], rest[key_end + len(GLM_KEY_END) :]
        parameters = self.parameters.get(self.name)
        if parameter_schema(parameters, key) is None:
            key = key.strip()
        head = json.dumps(key, ensure_ascii=False) + ":"
        value_at = rest.find(GLM_VALUE_BEGIN)
        if value_at < 0:
            return head
        value = rest[value_at + len(GLM_VALUE_BEGIN) :]
        types = value_types(parameters, key)
        if types is not None and "string" not in types:
            return head + value.strip()
        return head + json.dumps(value, ensure_ascii=False)[:-1]

    def _key(self, key: str) -> tuple[str, object]:
        """A pair's key and its schema (padding tolerated unless the key itself has it)."""
        parameters = self.parameters.get(self.name)
        if parameter_schema(parameters, key) is None:
            key = key.strip()
        return key, parameter_schema(parameters, key)

    def _string_value(self, buf: str, out: DeltaMessage, final: bool) -> tuple[str, bool | None]:
        """Stream a string value's text (``buf`` starts inside it). Returns the rest and: None
        while the value goes on (or the output ended inside it: cut, as ``_cut`` leaves it),
        False once ``</arg_value>`` closed it, True once the call ended in it or after it."""
        hit = find_first(buf, _GLM_VALUE_ENDS)
        if hit is None:
            end = len(buf) if final else safe_length(buf, _GLM_VALUE_ENDS)
            if end:
                out.add_tool_piece(ToolCallDelta(self.count, arguments=_json_text(buf[:end])))
            if final:
                return self._cut(out)[0], None
            return buf[end:], None
        index, marker = hit
        out.add_tool_piece(ToolCallDelta(self.count, arguments=_json_text(buf[:index]) + '"'))
        self.pairs += 1
        buf = buf[index + len(marker) :]
        if marker == GLM_VALUE_END:
            self.state = "pairs"
            return buf, False
        self._close(out)
        self.state = "name"
        return buf, True

    def feed(self, buf: str, out: DeltaMessage, final: bool) -> tuple[str, bool]:
        if self.state == "name":
            hit = find_first(buf, ("\n", GLM_KEY_BEGIN, GLM_CALL_END))
            if hit is None:
                # At the end (the output was cut: max_tokens) a name that never ended is not a
                # call: dropped, as an invalid call is, never completed into one.
                return ("", True) if final else (buf, False)
            index = hit[0] if hit is not None else len(buf)
            self.name = buf[:index].strip()
            buf = buf[index + (1 if hit is not None and hit[1] == "\n" else 0) :]
            if not self.name or "<" in self.name:
                self.state = "skip"
            elif self.name not in self.parameters:
                self.on_undeclared(self.name)
                self.state = "skip"
            else:
                out.add_tool_piece(ToolCallDelta(self.count, self.id_factory(), self.name, ""))
                self.pairs = 0
                self.state = "pairs"
        if self.state == "skip":
            hit = find_first(buf, (GLM_CALL_END,))
            if hit is None:
                return ("", True) if final else (buf[safe_length(buf, self.markers) :], False)
            self.state = "name"
            return buf[hit[0] + len(GLM_CALL_END) :], True
        while True:  # pairs
            if self.state == "value":
                buf, ended = self._string_value(buf, out, final)
                if ended is None:
                    return buf, final
                if ended:
                    return buf, True
                continue
            hit = find_first(buf, (GLM_KEY_BEGIN, GLM_CALL_END))
            if hit is not None and hit[1] == GLM_KEY_BEGIN:
                match = _GLM_PAIR.match(buf, hit[0])
                early_end = buf.find(GLM_CALL_END, hit[0])
                if match is not None and (early_end < 0 or early_end >= match.end()):
                    key, schema = self._key(match.group(1))
                    root = self.parameters.get(self.name)
                    value = convert_glm_value(match.group(2), schema, root, self.branches)
                    piece = glm_arguments_json([(key, value)])[0]
                    if self.pairs:
                        piece = "," + piece[1:]
                    out.add_tool_piece(ToolCallDelta(self.count, arguments=piece))
                    self.pairs += 1
                    buf = buf[match.end() :]
                    continue
                head = _GLM_PAIR_HEAD.match(buf, hit[0])
                if head is not None and (early_end < 0 or early_end >= head.end()):
                    key, schema = self._key(head.group(1))
                    root = self.parameters.get(self.name)
                    if glm_value_form(schema, root) == "raw":  # its text: stream it
                        piece = ("," if self.pairs else "{") + json.dumps(key, ensure_ascii=False)
                        out.add_tool_piece(ToolCallDelta(self.count, arguments=piece + ':"'))
                        buf = buf[head.end() :]
                        self.state = "value"
                        continue
                if early_end < 0:  # the pair is still arriving
                    if final:
                        return self._cut(out, buf[hit[0] :])
                    return buf[hit[0] :], False
                hit = (early_end, GLM_CALL_END)  # a broken pair: the call ends here
            if hit is None:
                if final:
                    return self._cut(out)
                return buf[safe_length(buf, self.markers) :], False
            self._close(out)
            self.state = "name"
            return buf[hit[0] + len(GLM_CALL_END) :], True


def tool_stream_for(
    tool_format: str,
    parameters: Mapping[str, Mapping | None],
    id_factory: IdFactory,
    on_undeclared: Undeclared = _ignore,
    branches: JsonBranches | None = None,
) -> KimiToolStream | GlmToolStream:
    if tool_format == "kimi":
        return KimiToolStream(parameters, id_factory, on_undeclared)
    return GlmToolStream(parameters, id_factory, on_undeclared, branches)


def tool_parameters(tools: Sequence[object]) -> dict[str, Mapping | None]:
    """``{name: parameters schema}`` from objects with ``name`` and ``parameters``."""
    return {t.name: t.parameters for t in tools}  # type: ignore[attr-defined]
