"""The slow, general way to match a rule's tokens: a table of which suffixes each tail of the
pattern can match, filled from the end, then each capture taken as long as the rest still
matches. Its cost is the tokens times the text, so ``rule_match`` uses it only on a host whose
captures mix ones that stop at ``.`` with ones that do not, within a budget of cells.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "literal", "placeholder" or "splat"
    text: str  # the literal, or the capture's name
    stops: str = ""  # a placeholder's characters it cannot take


def table_match(tokens: tuple[Token, ...], text: str) -> dict[str, str] | None:
    first, last = tokens[0] if tokens else None, tokens[-1] if tokens else None
    if first is not None and first.kind == "literal" and not text.startswith(first.text):
        return None  # most rules and paths part here, before any table is made
    if last is not None and last.kind == "literal" and not text.endswith(last.text):
        return None
    n = len(text)
    # rows[i][j]: tokens[i:] match text[j:] exactly.
    rows = [bytearray(n + 1) for _ in range(len(tokens) + 1)]
    rows[-1][n] = 1
    for i in range(len(tokens) - 1, -1, -1):
        token, row, after = tokens[i], rows[i], rows[i + 1]
        if token.kind == "literal":
            size = len(token.text)
            start = text.find(token.text)
            while start >= 0:
                if after[start + size]:
                    row[start] = 1
                start = text.find(token.text, start + 1)
        elif token.kind == "splat":
            seen = 0
            for j in range(n, -1, -1):
                seen |= after[j]
                row[j] = seen
        else:
            nearest = n + 1  # the smallest m > j with after[m], within j's run of non-stops
            for j in range(n - 1, -1, -1):
                if text[j] in token.stops:
                    nearest = n + 1
                    continue
                if after[j + 1]:
                    nearest = j + 1
                row[j] = nearest <= n
        if not any(row):
            return None
    if not rows[0][0]:
        return None
    return _captures(tokens, text, rows)


def _captures(tokens: tuple[Token, ...], text: str, rows: list[bytearray]) -> dict[str, str]:
    """Each capture as long as the rest can still match (the backtracking regex's choice)."""
    captures: dict[str, str] = {}
    position = 0
    for i, token in enumerate(tokens):
        after = rows[i + 1]
        if token.kind == "literal":
            position += len(token.text)
            continue
        if token.kind == "splat":
            low, high = position, len(text)
        else:
            low, high = position + 1, position
            while high < len(text) and text[high] not in token.stops:
                high += 1
        best = high
        while best > low and not after[best]:  # the table says one in [low, high] does
            best -= 1
        captures[token.text] = text[position:best]
        position = best
    return captures
