"""The last occurrence of a literal before a position, in time linear in the text.

``str.rfind`` compares the literal from each position in turn (text x literal); the rule matcher
(``rule_match.py``) places a segment's literals from the right, and a tenant's rule with long
literals against a long path made that seconds on the serving loop (review18). ``str.find`` on
the reversed strings uses CPython's linear two-way search, given a long enough haystack.
"""

from __future__ import annotations

# CPython's str.find is linear (its two-way search) only for a haystack of at least 30,000
# characters and over 3 needles long; shorter ones get a search that is path x needle again.
_TWO_WAY_FROM = 30_000
_PAD = "\x00"  # never in a pathname (controls are percent-encoded), so never in a match
_SMALL_WORK = 50_000  # path x literal below which the plain search is as quick as any


def reversed_for_search(text: str, literals: tuple[str, ...]) -> str:
    """``text[::-1]`` for ``last_before``, padded past where ``str.find`` turns linear when
    the quadratic search could cost much."""
    backwards = text[::-1]
    longest = max(len(literal) for literal in literals)
    if len(text) * longest <= _SMALL_WORK:
        return backwards
    return backwards + _PAD * (max(_TWO_WAY_FROM - len(text), 0) + 4 * longest)


def last_before(backwards: str, size: int, literal: str, limit: int) -> int:
    """``text.rfind(literal, 0, limit)``, with ``backwards`` from ``reversed_for_search`` and
    ``size`` = ``len(text)``: where the last ``literal`` ending by ``limit`` starts, or -1.
    ``str.rfind`` compares from each position in turn (path x literal: 100 rules with a
    literal of 990 ``-``, a ``~`` and 990 more against a 64 KB path of ``-`` took seconds,
    review18); ``str.find`` on the reversed strings is CPython's linear two-way search."""
    if _PAD in literal:  # (it could match into the padding; it never matches a pathname)
        backwards = backwards[:size]
    found = backwards.find(literal[::-1], size - limit)
    return -1 if found < 0 or found + len(literal) > size else size - found - len(literal)
