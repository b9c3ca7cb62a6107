"""What the output parser produces: increments of an assistant message (streaming) and the
whole message they add up to (non-streaming)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ToolCallDelta:
    """A piece of tool call ``index``: the first piece carries ``id`` and ``name`` (and empty
    ``arguments``), later pieces carry argument text only."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""

    def to_dict(self) -> dict:
        out: dict = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
        function: dict = {}
        if self.name is not None:
            function["name"] = self.name
        function["arguments"] = self.arguments
        out["function"] = function
        return out


@dataclass
class DeltaMessage:
    """One increment; empty strings mean "nothing new"."""

    reasoning: str = ""
    content: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.reasoning or self.content or self.tool_calls)

    def add_tool_piece(self, piece: ToolCallDelta) -> None:
        last = self.tool_calls[-1] if self.tool_calls else None
        if last is not None and last.index == piece.index and piece.id is None:
            last.arguments += piece.arguments
        else:
            self.tool_calls.append(piece)

    def extend(self, other: DeltaMessage) -> None:
        self.reasoning += other.reasoning
        self.content += other.content
        for piece in other.tool_calls:
            self.add_tool_piece(ToolCallDelta(piece.index, piece.id, piece.name, piece.arguments))

    def to_dict(self) -> dict:
        """The ``delta`` object of a ``chat.completion.chunk`` (only the fields present)."""
        out: dict = {}
        if self.reasoning:
            # SGLang's name and current vLLM's, so clients of either find it.
            out["reasoning_content"] = out["reasoning"] = self.reasoning
        if self.content:
            out["content"] = self.content
        if self.tool_calls:
            out["tool_calls"] = [t.to_dict() for t in self.tool_calls]
        return out


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON string, as OpenAI sends it

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ParsedOutput:
    content: str | None
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]


class OutputAccumulator:
    """Adds deltas up into the final message (the non-streaming answer, or a log of a stream)."""

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.calls: dict[int, list[str]] = {}
        self.heads: dict[int, tuple[str, str]] = {}

    def add(self, delta: DeltaMessage) -> None:
        self.reasoning.append(delta.reasoning)
        self.content.append(delta.content)
        for piece in delta.tool_calls:
            if piece.id is not None:
                self.heads[piece.index] = (piece.id, piece.name or "")
            self.calls.setdefault(piece.index, []).append(piece.arguments)

    def result(self) -> ParsedOutput:
        calls = tuple(
            ToolCall(self.heads[i][0], self.heads[i][1], "".join(self.calls.get(i, [])))
            for i in sorted(self.heads)
        )
        reasoning = "".join(self.reasoning)
        content = "".join(self.content)
        # Empty content is null beside reasoning or tool calls, "" when nothing came at all.
        return ParsedOutput(
            content=content if content or not (calls or reasoning) else None,
            reasoning=reasoning or None,
            tool_calls=calls,
        )
