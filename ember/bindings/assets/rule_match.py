"""The URL patterns of ``_redirects`` and ``_headers``: a splat and ``:placeholders``.

As workers-shared's rules engine (``generateRuleRegExp``) reads a pattern: ``*`` captures any
run of characters as ``splat``, ``:name`` (a letter, then letters, digits or ``_``) captures one
or more characters other than ``/`` (``/`` and ``.`` in the host of an ``https://`` rule), the
rest is literal and the whole path must match. A pattern the platform's regular expression
refuses to compile (two splats, a name used twice) never matches: ``compile_pattern`` is None.

Matching is linear in the path: a table of which suffixes each tail of the pattern can match,
filled from the end, then each capture taken as long as the rest still matches, which is the
match a backtracking regular expression (greedy, first alternative first) finds. The regular
expression itself backtracks polynomially (``/:a:b:c:d:e!`` against a long segment) on a rule a
tenant writes, matched on the serving loop for every request. ``match_reference`` is that
regular expression, kept as the slow reference the tests compare with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEHOLDER = re.compile(r":([A-Za-z][A-Za-z0-9_]*)")
_PIECE = re.compile(r"\*|:([A-Za-z][A-Za-z0-9_]*)")
# The characters the platform escapes: a host placeholder must be followed by one of them.
_ESCAPED = set("-/\\^$+?.()|[]{}")
HTTPS = "https://"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "literal", "placeholder" or "splat"
    text: str  # the literal, or the capture's name
    stops: str = ""  # a placeholder's characters it cannot take


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled rule pattern."""

    source: str
    cross_host: bool  # an ``https://host/path`` rule: matched against the request's host too
    tokens: tuple[_Token, ...]

    def subject(self, host: str, pathname: str) -> str:
        """What the pattern is matched against (the host without its port)."""
        return f"{HTTPS}{host}{pathname}" if self.cross_host else pathname

    def match(self, host: str, pathname: str) -> dict[str, str] | None:
        """The captures when the request's ``pathname`` (on ``host``) matches, else None."""
        return _match(self.tokens, self.subject(host, pathname))


def compile_pattern(rule: str) -> Pattern | None:
    """``rule`` as the platform compiles it; None where its regular expression would not."""
    host_end = -1
    if rule.startswith(HTTPS):
        slash = rule.find("/", len(HTTPS))
        host_end = len(rule) if slash < 0 else slash
    tokens: list[_Token] = []
    names: set[str] = set()
    position = 0
    for found in _PIECE.finditer(rule):
        if found.start() > position:
            tokens.append(_Token("literal", rule[position : found.start()]))
        position = found.end()
        name = found[1] or "splat"
        if name in names:
            return None  # a duplicate named group: the platform's RegExp throws, rule dropped
        names.add(name)
        if found[1] is None:
            tokens.append(_Token("splat", name))
            continue
        after = rule[found.end() : found.end() + 1]
        in_host = found.start() < host_end and after in _ESCAPED and after != ""
        tokens.append(_Token("placeholder", name, "/." if in_host else "/"))
    if position < len(rule):
        tokens.append(_Token("literal", rule[position:]))
    return Pattern(rule, rule.startswith(HTTPS), tuple(tokens))


def _match(tokens: tuple[_Token, ...], text: str) -> dict[str, str] | None:
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


def _captures(tokens: tuple[_Token, ...], text: str, rows: list[bytearray]) -> dict[str, str]:
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


def replace(value: str, captures: dict[str, str]) -> str:
    """``:name`` in ``value`` replaced by its capture (``:splat`` by the splat's); a name
    without one stays as written. One pass: ``:id`` never eats the start of ``:id_2``."""
    return PLACEHOLDER.sub(lambda found: captures.get(found[1], found[0]), value)


def match_reference(rule: str, host: str, pathname: str) -> dict[str, str] | None:
    """The platform's regular expression, in Python's (slow reference: it backtracks)."""
    pattern = compile_pattern(rule)
    if pattern is None:
        return None
    parts = []
    for token in pattern.tokens:
        if token.kind == "literal":
            parts.append(re.escape(token.text))
        elif token.kind == "splat":
            parts.append("(?P<splat>.*)")
        else:
            parts.append(f"(?P<{token.text}>[^{re.escape(token.stops)}]+)")
    found = re.fullmatch("".join(parts), pattern.subject(host, pathname), flags=re.DOTALL)
    return found.groupdict() if found else None
