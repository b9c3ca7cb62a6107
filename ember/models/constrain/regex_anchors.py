"""Where a pattern's anchors may stand: ``^`` / ``$`` / ``\\A`` / ``\\Z`` are understood only at
the ends of the pattern or of a top-level alternative (regex_syntax.py parses them anywhere)."""

from __future__ import annotations

from ember.models.constrain.regex_syntax import (
    Alt,
    Anchor,
    Concat,
    Regex,
    RegexError,
    Repeat,
)


def split_anchors(tree: Regex, pattern: str) -> list[tuple[bool, Regex, bool]]:
    """The top-level alternatives as ``(anchored_start, body, anchored_end)``. Anchors are only
    understood at the start or end of the pattern or of a top-level alternative; anywhere else
    (inside a group, mid-pattern) they raise ``RegexError``."""
    branches = tree.items if isinstance(tree, Alt) else (tree,)
    out = []
    for branch in branches:
        items = branch.items if isinstance(branch, Concat) else (branch,)
        # Counted, then sliced once: popping the front one at a time was quadratic, and
        # "^" * 590,000 took 19.6 CPU-s within the budget (review43).
        first, last = 0, len(items)
        while first < last and isinstance(items[first], Anchor) and items[first].kind == "start":
            first += 1
        while (
            last > first and isinstance(items[last - 1], Anchor) and items[last - 1].kind == "end"
        ):
            last -= 1
        start, end = first > 0, last < len(items)
        body = Concat(tuple(items[first:last]))
        stray = _first_anchor(body)
        if stray is not None:
            where = "'^'" if stray.kind == "start" else "'$'"
            raise RegexError(
                f"anchor {where} inside the pattern",
                stray.offset,
                pattern,
                "anchors are supported only at the start or end of the pattern",
            )
        out.append((start, body, end))
    return out


def _first_anchor(tree: Regex) -> Anchor | None:
    if isinstance(tree, Anchor):
        return tree
    if isinstance(tree, Concat | Alt):
        for item in tree.items:
            found = _first_anchor(item)
            if found is not None:
                return found
    if isinstance(tree, Repeat):
        return _first_anchor(tree.item)
    return None
