"""Grammar nodes of tool calls: a repeat whose item depends on its index (Kimi numbers its
calls), and GLM's key/value pairs in schema order. Kept apart from ``tool_grammars``, which
builds the grammars from tool schemas with them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember.models.constrain.nodes import POP, PUSH, Move, Node


class IndexedRepeat(Node):
    """``factory(i)`` for i = 0, 1, ... between ``minimum`` and ``maximum`` times: the item
    may depend on its index (Kimi numbers its calls ``functions.NAME:i``)."""

    __slots__ = ("factory", "minimum", "maximum", "items")

    def __init__(self, factory: Callable[[int], Node], minimum: int, maximum: int) -> None:
        self.factory = factory
        self.minimum = minimum
        self.maximum = maximum
        self.items: dict[int, Node] = {}

    def _item(self, index: int) -> Node:
        item = self.items.get(index)
        if item is None:
            item = self.items[index] = self.factory(index)
        return item

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        moves: list[Move] = []
        if local >= self.minimum:
            moves.append((POP,))
        if local < self.maximum:
            moves.append((PUSH, local + 1, self._item(local).frame()))
        return tuple(moves)


class GlmArguments(Node):
    """GLM's key/value pairs for one call: declared properties in schema order, optional ones
    skippable, required ones present (local: index of the next property that may come)."""

    __slots__ = ("pairs", "required", "can_close")

    def __init__(self, pairs: Sequence[Node], required: Sequence[bool]) -> None:
        self.pairs = tuple(pairs)
        self.required = tuple(required)
        n = len(self.pairs)
        self.can_close = tuple(not any(self.required[i:]) for i in range(n + 1))

    def step(self, local: int, sym: int) -> tuple[Move, ...]:
        moves: list[Move] = []
        if self.can_close[local]:
            moves.append((POP,))
        for j in range(local, len(self.pairs)):
            moves.append((PUSH, j + 1, self.pairs[j].frame()))
            if self.required[j]:
                break
        return tuple(moves)
