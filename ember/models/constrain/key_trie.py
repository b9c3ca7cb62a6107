"""A byte trie over a fixed list of byte strings (object keys, enum spellings, excluded names).

Grammar nodes that match "one of these byte strings" used to keep, per node, the set of every
prefix of every string: quadratic in a string's length, and for objects once per start position
(review26: 2000 optional properties took 70 s and 4.1 GiB from a 95 KiB schema). Here each
string is walked into the trie once; a trie node is an int, and knows the indices of the strings
that pass through it (ascending) and of the one that ends there. So the whole trie costs space
and time linear in the strings' bytes, and "is this a prefix of a string whose index lies in
``[low, high]``" is one binary search.

``ReferenceKeys`` is the slow definition (prefix sets of byte strings), kept for the tests.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

ROOT = 0


class ByteTrie:
    """See the module docstring. Strings may repeat: the node's ``ends`` is the first index."""

    __slots__ = ("children", "below", "ends")

    def __init__(self, strings: Sequence[bytes]) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.below: list[list[int]] = [[]]
        self.ends: list[int | None] = [None]
        for index, text in enumerate(strings):
            node = ROOT
            self.below[ROOT].append(index)
            for byte in text:
                nxt = self.children[node].get(byte)
                if nxt is None:
                    nxt = len(self.children)
                    self.children[node][byte] = nxt
                    self.children.append({})
                    self.below.append([])
                    self.ends.append(None)
                node = nxt
                self.below[node].append(index)
            if self.ends[node] is None:
                self.ends[node] = index

    def child(self, node: int, byte: int) -> int | None:
        """The node after ``byte``, or None when no string goes on that way."""
        return self.children[node].get(byte)

    def leads_to(self, node: int, low: int, high: int) -> bool:
        """Does some string with an index in ``[low, high]`` pass through ``node``?"""
        below = self.below[node]
        i = bisect_left(below, low)
        return i < len(below) and below[i] <= high

    def step(self, node: int, byte: int, low: int, high: int) -> int | None:
        """``child``, kept only when it still leads to a string indexed in ``[low, high]``."""
        nxt = self.children[node].get(byte)
        if nxt is None or not self.leads_to(nxt, low, high):
            return None
        return nxt

    def walk(self, text: bytes, low: int = 0, high: int | None = None) -> int | None:
        """The node ``text`` leads to among strings indexed ``low..high`` (None: off the trie)."""
        top = len(self.below[ROOT]) - 1 if high is None else high
        node: int | None = ROOT
        for byte in text:
            node = self.step(node, byte, low, top)
            if node is None:
                return None
        return node

    def size(self) -> int:
        """Entries held (nodes plus index entries): linear in the strings' bytes."""
        return len(self.children) + sum(len(b) for b in self.below)


class ReferenceKeys:
    """The slow definition of an object's allowed keys: for each start position, the keys from
    there up to and including the next required one, and every prefix of each. Quadratic: for
    tests only."""

    def __init__(self, keys: Sequence[bytes], required: Sequence[bool]) -> None:
        self.index: list[dict[bytes, int]] = []
        self.prefixes: list[frozenset[bytes]] = []
        for start in range(len(keys) + 1):
            candidates: dict[bytes, int] = {}
            for j in range(start, len(keys)):
                candidates.setdefault(keys[j], j)
                if required[j]:
                    break
            self.index.append(candidates)
            self.prefixes.append(frozenset(k[:i] for k in candidates for i in range(len(k) + 1)))
