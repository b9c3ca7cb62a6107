"""What may come around tool calls in a constrained answer: free text before them (``tool_choice``
auto with a strict tool) and the model's reasoning before everything. Built on
``tool_grammars``' markers; kept apart from how calls themselves are written."""

from __future__ import annotations

from ember.models.constrain.nodes import (
    BoundedText,
    Choice,
    FreeText,
    Marker,
    Maybe,
    Node,
    Seq,
    SubstringGuard,
    Whitespace,
)
from ember.models.constrain.tool_grammars import (
    GLM_CALL_BEGIN,
    KIMI_SECTION_BEGIN,
    THINK_BEGIN,
    THINK_END,
    ReasoningPrefix,
    ToolFormat,
    family_markers,
)


def text_or_tool_calls(calls: Node, marker: Marker, tool_format: ToolFormat) -> Node:
    """``tool_choice`` auto with a strict tool: content (any text that spells no tool-call
    marker), then tool calls or nothing, so that a call the model makes has the arguments its
    schema allows, and an answer without one is free (OpenAI's strict function calling)."""
    begin = KIMI_SECTION_BEGIN if tool_format == "kimi" else GLM_CALL_BEGIN
    guard = SubstringGuard([m.encode() for m in family_markers(tool_format)])
    text = BoundedText(0, None, guard, byte_end=marker.token_id(begin) is None)
    return Seq([text, Maybe(calls)])


def with_reasoning(
    body: Node,
    marker: Marker,
    prefix: ReasoningPrefix,
    *,
    forbidden: tuple[str, ...] = (),
    ws: int = 2,
) -> Node:
    """Free reasoning text before ``body``: ``inside`` when the prompt already opened a
    ``<think>`` block (GLM-4.7/5 with thinking on), ``optional`` when the model may open one
    itself, ``off`` when thinking is disabled. ``forbidden``: markers the reasoning may not
    spell (a tool-call start would end the reasoning for the output parser)."""
    if prefix == "off":
        return body
    reasoning = FreeText(THINK_END, marker.token_id(THINK_END), forbidden=forbidden)
    thinking = Seq([reasoning, Whitespace(ws), body])
    if prefix == "inside":
        return thinking
    return Choice([Seq([marker(THINK_BEGIN), thinking]), body])
