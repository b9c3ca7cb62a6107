"""Model output text -> OpenAI message fields (reasoning_content, content, tool_calls), for
Kimi K2 and GLM-4.5/4.7/5, incrementally.

Feed the detokenized text as it arrives (special tokens that are markers must be kept in it:
``<think>``, ``</think>``, the tool-call markers; EOS and stop tokens left out); each ``feed``
returns what can be released now, and ``finish`` releases the rest. ``parse_output`` is the
same machine run over a whole text, so a stream's deltas always add up to the non-streaming
message.

Rules:
- reasoning: with ``reasoning="inside"`` (the prompt ended with ``<think>``: GLM-4.7/5 with
  thinking on) the output starts in reasoning; with ``"optional"`` reasoning starts only if
  the output opens with ``<think>``; ``"off"`` (thinking disabled) never splits. Reasoning
  ends at ``</think>`` or, implicitly, where a tool-call section starts (Kimi may skip
  ``</think>``).
- reasoning and content are trimmed at their edges (whitespace is held back until more text
  follows); whitespace right before a tool call is dropped.
- tool calls are parsed only when the request had tools (and tool_choice was not ``none``);
  otherwise the markup stays in the content.
- ``drop``: marker texts that came from special tokens the server kept in the text only for
  this parser (with ``skip_special_tokens``, as SGLang and vLLM default). Where the parser
  consumes one (``</think>`` ending reasoning, a tool-section start) it does; anywhere else in
  reasoning or content it is dropped, so that a stray ``</think>`` or a tool marker the model
  emits out of place never reaches the client, as no other special token does.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping, Sequence

from ember.models.api.deltas import DeltaMessage, OutputAccumulator, ParsedOutput
from ember.models.api.text_stream import TrimmedSegment, find_first, safe_length
from ember.models.api.tool_streams import IdFactory, Undeclared, tool_stream_for
from ember.models.api.tool_values import JsonBranches
from ember.models.constrain.tool_grammars import THINK_BEGIN, THINK_END, ReasoningPrefix, ToolFormat

_ALPHABET = string.ascii_letters + string.digits


def random_call_id() -> str:
    """``call_`` + 24 random letters and digits, like OpenAI's tool-call ids."""
    return "call_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


def _ignore(name: str) -> None:
    pass


class ChatOutputParser:
    def __init__(
        self,
        tool_format: ToolFormat,
        *,
        tools: Mapping[str, Mapping | None] | None = None,
        reasoning: ReasoningPrefix = "off",
        id_factory: IdFactory = random_call_id,
        drop: Sequence[str] = (),
        on_undeclared: Undeclared | None = None,
        branches: JsonBranches | None = None,
    ) -> None:
        """``tools``: ``{name: parameters schema}`` when tool calls should be parsed, else
        None. ``reasoning``, ``drop``: see the module docstring. ``on_undeclared``: told the
        name of each call dropped because the request declared no such tool. ``branches``:
        GLM's compiled JSON branches, shared by a request's choices."""
        self.tools = (
            tool_stream_for(tool_format, tools, id_factory, on_undeclared or _ignore, branches)
            if tools is not None
            else None
        )
        self.drop = tuple(marker for marker in drop if marker)
        self.phase = {"inside": "reasoning", "optional": "detect", "off": "content"}[reasoning]
        self.buffer = ""
        self.reasoning = TrimmedSegment()
        self.content = TrimmedSegment()
        self.done = False

    def _content_markers(self) -> Sequence[str]:
        return (self.tools.start_marker,) if self.tools is not None else ()

    def feed(self, text: str) -> DeltaMessage:
        """Parse the next piece of output; returns what can be released now."""
        if self.done:
            raise RuntimeError("feed() after finish()")
        self.buffer += text
        out = DeltaMessage()
        self._run(out, final=False)
        return out

    def finish(self) -> DeltaMessage:
        """The output is complete: release everything still held back."""
        out = DeltaMessage()
        if not self.done:
            self._run(out, final=True)
            self.done = True
        return out

    def _run(self, out: DeltaMessage, final: bool) -> None:
        while getattr(self, "_" + self.phase)(out, final):
            pass

    def _detect(self, out: DeltaMessage, final: bool) -> bool:
        head = self.buffer.lstrip()
        if head.startswith(THINK_BEGIN):
            self.buffer = head[len(THINK_BEGIN) :]
            self.phase = "reasoning"
            return True
        if THINK_BEGIN.startswith(head) and not final:
            return False  # still could be "<think>"
        self.phase = "content"
        return True

    def _reasoning(self, out: DeltaMessage, final: bool) -> bool:
        ends = (THINK_END, *self._content_markers())
        markers = (*ends, *self.drop)
        hit = find_first(self.buffer, markers)
        if hit is None:
            end = len(self.buffer) if final else safe_length(self.buffer, markers)
            out.reasoning += self.reasoning.push(self.buffer[:end])
            self.buffer = self.buffer[end:]
            return False
        index, marker = hit
        out.reasoning += self.reasoning.push(self.buffer[:index])
        if marker not in ends:  # a special token out of place: dropped, reasoning goes on
            self.buffer = self.buffer[index + len(marker) :]
            return True
        self.reasoning.drop_pending()
        # </think> is consumed; a tool-section start is left for the content phase.
        self.buffer = self.buffer[index + (len(marker) if marker == THINK_END else 0) :]
        self.phase = "content"
        return True

    def _content(self, out: DeltaMessage, final: bool) -> bool:
        starts = self._content_markers()
        markers = (*starts, *self.drop)
        hit = find_first(self.buffer, markers) if markers else None
        if hit is None:
            end = len(self.buffer) if final else safe_length(self.buffer, markers)
            out.content += self.content.push(self.buffer[:end])
            self.buffer = self.buffer[end:]
            return False
        index, marker = hit
        out.content += self.content.push(self.buffer[:index])
        if marker not in starts:  # a special token out of place: dropped, content goes on
            self.buffer = self.buffer[index + len(marker) :]
            return True
        self.content.drop_pending()
        self.buffer = self.buffer[index + len(marker) :]
        self.phase = "tools"
        return True

    def _tools(self, out: DeltaMessage, final: bool) -> bool:
        assert self.tools is not None
        self.buffer, section_over = self.tools.feed(self.buffer, out, final)
        if section_over:
            self.phase = "content"
            return bool(self.buffer) or not final
        return False


def parse_output(
    text: str,
    tool_format: ToolFormat,
    *,
    tools: Mapping[str, Mapping | None] | None = None,
    reasoning: ReasoningPrefix = "off",
    id_factory: IdFactory = random_call_id,
    drop: Sequence[str] = (),
) -> ParsedOutput:
    """The whole message for a complete output text (non-streaming)."""
    parser = ChatOutputParser(
        tool_format, tools=tools, reasoning=reasoning, id_factory=id_factory, drop=drop
    )
    total = OutputAccumulator()
    total.add(parser.feed(text))
    total.add(parser.finish())
    return total.result()


def reasoning_prefix(prompt: str, *, enable_thinking: bool) -> ReasoningPrefix:
    """How a rendered prompt leaves the model: already inside ``<think>`` (the template opened
    it), free to open one, or with thinking off."""
    if not enable_thinking:
        return "off"
    return "inside" if prompt.rstrip().endswith(THINK_BEGIN) else "optional"
