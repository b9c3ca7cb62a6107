"""The URL patterns of ``_redirects`` and ``_headers``: a splat and ``:placeholders``.

As workers-shared's rules engine (``generateRuleRegExp``) reads a pattern: ``*`` captures any
run of characters as ``splat``, ``:name`` (a letter, then letters, digits or ``_``) captures one
or more characters other than ``/`` (``/`` and ``.`` in the host of an ``https://`` rule), the
rest is literal and the whole path must match. A pattern the platform's regular expression
refuses to compile (two splats, a name used twice) never matches: ``compile_pattern`` is None.

Matching costs about the path's length plus the pattern's, whatever the rule: placeholders
never cross ``/``, so the pattern's slashes line up with the path's (counted first: a rule of 500
segments rejects a path of 7,000 at once), except across the one splat, whose segment's two sides
match the end of one path segment and the start of another. Within a segment, adjacent
captures form one gap and the literals between gaps are placed as far right as the rest allows
(``rfind`` from the end), which is the match a backtracking regular expression (greedy, first
alternative first) finds: each capture as long as the rest can still match. A host whose
captures all stop at ``.`` is matched label by label the same way; one that mixes them falls
back to a table (which suffixes each tail of the pattern can match) within ``MAX_HOST_TABLE``
cells. The platform's regular expression backtracks polynomially (``/:a:b:c:d:e!`` against a
long segment), and a table over the whole path cost 20 s for one request on the serving loop
(review14); ``match_reference`` is that regular expression, kept as the slow reference the tests
compare with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ember.bindings.assets.rule_table import Token as _Token
from ember.bindings.assets.rule_table import table_match
from ember.bindings.assets.search_back import last_before, reversed_for_search

PLACEHOLDER = re.compile(r":([A-Za-z][A-Za-z0-9_]*)")
_PIECE = re.compile(r"\*|:([A-Za-z][A-Za-z0-9_]*)")
# The characters the platform escapes: a host placeholder must be followed by one of them.
_ESCAPED = set("-/\\^$+?.()|[]{}")
HTTPS = "https://"


_FREE = _Token("splat", "")  # the splat's side of a segment it starts or ends in


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled rule pattern."""

    source: str
    cross_host: bool  # an ``https://host/path`` rule: matched against the request's host too
    tokens: tuple[_Token, ...]
    segments: tuple[_Segment, ...]
    runs: _Runs
    splat: int  # the index of the segment with the splat, -1: none

    def subject(self, host: str, pathname: str) -> str:
        """What the pattern is matched against (the host without its port)."""
        return f"{HTTPS}{host}{pathname}" if self.cross_host else pathname

    def match(self, host: str, pathname: str) -> dict[str, str] | None:
        """The captures when the request's ``pathname`` (on ``host``) matches, else None."""
        return _match(self, self.subject(host, pathname))


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
    segments = _segments(tuple(tokens))
    splat = next((i for i, segment in enumerate(segments) if segment.splat), -1)
    return Pattern(rule, rule.startswith(HTTPS), tuple(tokens), segments, _runs(segments), splat)


def _match(pattern: Pattern, text: str) -> dict[str, str] | None:
    """Segment by segment: placeholders never cross ``/``, so the pattern's ``/`` line up with
    the path's, except across the one splat."""
    tokens, segments, runs = pattern.tokens, pattern.segments, pattern.runs
    first, last = tokens[0] if tokens else None, tokens[-1] if tokens else None
    if first is not None and first.kind == "literal" and not text.startswith(first.text):
        return None  # most rules and paths part here, before anything is split
    if last is not None and last.kind == "literal" and not text.endswith(last.text):
        return None
    splat = pattern.splat
    if splat < 0:
        if text.count("/") != len(segments) - 1:
            return None  # counted in C before any segment of a 16 KB path is made
        captures: dict[str, str] = {}
        return captures if _each(segments, runs, text.split("/"), captures) else None
    before, after = splat, len(segments) - 1 - splat  # whole segments either side of it
    if text.count("/") < before + after:
        return None
    head = text.split("/", before)
    tail = head[-1].rsplit("/", after)
    captures = {}
    if not _each(segments[:before], runs.cut(0, before), head[:before], captures):
        return None
    if not _each(segments[splat + 1 :], runs.cut(splat + 1, len(segments)), tail[1:], captures):
        return None
    middle = tail[0]  # the splat's segment(s): ``A*B``, A a prefix, B a suffix of ``middle``
    if "/" not in middle:
        found = _segment(segments[splat], middle)
        if found is None:
            return None
        return {**captures, **found}
    left, right = middle.split("/", 1)[0], middle.rsplit("/", 1)[1]
    lead, trail = segments[splat].split
    start = _segment(lead, left)
    end = _segment(trail, right)
    if start is None or end is None:
        return None
    begin = len(left) - len(start.pop(_FREE.text))
    stop = len(middle) - len(right) + len(end.pop(_FREE.text))
    return {**captures, **start, "splat": middle[begin:stop], **end}


@dataclass(frozen=True, slots=True)
class _Segment:
    """The tokens between two of the pattern's literal ``/``, laid out for matching once, when
    the rule is compiled: literals, the gaps of adjacent captures between them, and each gap's
    least length (one character a placeholder)."""

    tokens: tuple[_Token, ...]
    literals: tuple[str, ...]
    gaps: tuple[tuple[_Token, ...], ...]
    least: tuple[int, ...]
    host: bool  # a placeholder here stops at "." too: matched by the table
    splat: bool
    split: tuple[_Segment, _Segment] | None  # the splat's segment: its two sides, each with _FREE
    only: str  # the name when the segment is one placeholder alone, else ""
    labels: tuple[_Segment, ...]  # a host whose captures all stop at ".": its labels
    label_runs: _Runs
    # per gap: the later captures' names when all are placeholders (else None), and how many
    # characters they need: worked out once, not on every request
    shares: tuple[tuple[tuple[str, ...] | None, int], ...]


def _layout(tokens: tuple[_Token, ...], split: bool = True) -> _Segment:
    literals: list[str] = [""]  # one more than the gaps once the last literal is in
    gaps: list[list[_Token]] = []
    for token in tokens:
        if token.kind == "literal":
            if len(gaps) == len(literals):
                literals.append("")
            literals[-1] += token.text
        elif len(gaps) == len(literals):
            gaps[-1].append(token)
        else:
            gaps.append([token])
    if len(gaps) == len(literals):
        literals.append("")
    splat = any(t.kind == "splat" and t.text == "splat" for t in tokens)
    sides = None
    if splat and split:
        cut = next(i for i, t in enumerate(tokens) if t.kind == "splat")
        sides = (
            _layout((*tokens[:cut], _FREE), False),
            _layout((_FREE, *tokens[cut + 1 :]), False),
        )
    return _Segment(
        tokens,
        tuple(literals),
        tuple(tuple(gap) for gap in gaps),
        tuple(sum(t.kind == "placeholder" for t in gap) for gap in gaps),
        any("." in t.stops for t in tokens),
        splat,
        sides,
        tokens[0].text if len(tokens) == 1 and tokens[0].stops == "/" else "",
        labels := _labels(tokens),
        _runs(labels),
        tuple(_plan(gap) for gap in gaps),
    )


def _plan(gap: list[_Token]) -> tuple[tuple[str, ...] | None, int]:
    later = gap[1:]
    need = sum(t.kind == "placeholder" for t in later)
    return (tuple(t.text for t in later) if need == len(later) else None), need


@dataclass(frozen=True, slots=True)
class _Runs:
    """Per segment: how many segments from it on are a lone placeholder each, and its name."""

    counts: tuple[int, ...]
    names: tuple[str, ...]

    def cut(self, start: int, end: int) -> _Runs:
        return _Runs(self.counts[start:end], self.names[start:end])


def _runs(segments: tuple[_Segment, ...]) -> _Runs:
    out = [0] * (len(segments) + 1)
    for index in range(len(segments) - 1, -1, -1):
        out[index] = out[index + 1] + 1 if segments[index].only else 0
    return _Runs(tuple(out[:-1]), tuple(segment.only for segment in segments))


def _labels(tokens: tuple[_Token, ...]) -> tuple[_Segment, ...]:
    """A host's labels, when every capture in it stops at ``.``: then the rule's dots line up
    with the host's as its slashes do with the path's."""
    captures = [t for t in tokens if t.kind != "literal"]
    if not captures or any(t.stops != "/." for t in captures):
        return ()
    plain = tuple(t if t.kind == "literal" else _Token(t.kind, t.text, "/") for t in tokens)
    return tuple(_layout(label) for label in _split(plain, "."))


def _segments(tokens: tuple[_Token, ...]) -> tuple[_Segment, ...]:
    """The tokens between the pattern's literal ``/`` characters."""
    return tuple(_layout(segment) for segment in _split(tokens, "/"))


def _split(tokens: tuple[_Token, ...], separator: str) -> list[tuple[_Token, ...]]:
    out: list[list[_Token]] = [[]]
    for token in tokens:
        if token.kind != "literal":
            out[-1].append(token)
            continue
        for index, piece in enumerate(token.text.split(separator)):
            if index:
                out.append([])
            if piece:
                out[-1].append(_Token("literal", piece))
    return [tuple(part) for part in out]


def _each(
    segments: tuple[_Segment, ...],
    runs: _Runs,
    parts: list[str],
    captures: dict[str, str],
) -> bool:
    """Each segment against its part of the path, captures added. A run of lone placeholders
    (``/:a/:b/...``) is checked and captured in C: a 16 KB path has thousands of segments."""
    index, count = 0, len(segments)
    while index < count:
        segment = segments[index]
        if runs.counts[index]:
            end = min(index + runs.counts[index], count)
            chunk = parts[index:end]
            if "" in chunk:
                return False
            captures.update(zip(runs.names[index:end], chunk, strict=True))
            index = end
            continue
        if not segment.gaps:
            if parts[index] != segment.literals[0]:
                return False
        else:
            found = _segment(segment, parts[index])
            if found is None:
                return False
            captures.update(found)
        index += 1
    return True


def _segment(segment: _Segment, text: str) -> dict[str, str] | None:
    """``tokens`` (no ``/`` among them) matched against all of ``text`` (no ``/`` in it).

    Adjacent captures form one gap; the literals between gaps are placed as far right as the
    rest still allows (the last match before the next literal, found in linear time), which
    is what the greedy regular expression chooses: each capture as long as the rest can still
    match."""
    if segment.labels:
        if text.count(".") != len(segment.labels) - 1:
            return None
        captures: dict[str, str] = {}
        parts = text.split(".")
        return captures if _each(segment.labels, segment.label_runs, parts, captures) else None
    if segment.host:
        return _host_segment(segment.tokens, text)
    literals, gaps, least = segment.literals, segment.gaps, segment.least
    if not gaps:
        return {} if text == literals[0] else None
    first, final = literals[0], literals[-1]
    if not text.startswith(first) or not text.endswith(final):
        return None
    starts = [0] * len(literals)
    starts[-1] = len(text) - len(final)
    backwards = reversed_for_search(text, literals[1:-1]) if len(literals) > 2 else text
    for index in range(len(literals) - 2, 0, -1):
        limit = starts[index + 1] - least[index]
        if limit < len(first) + len(literals[index]):
            return None  # (and never a negative bound, which rfind reads from the end)
        starts[index] = last_before(backwards, len(text), literals[index], limit)
        if starts[index] < 0:
            return None
    if starts[1] - len(first) < least[0]:
        return None
    captures = {}
    for index, gap in enumerate(gaps):
        low = starts[index] + len(literals[index]) if index else len(first)
        high = starts[index + 1]
        _share(gap, segment.shares[index], text[low:high], captures)
    return captures


def _share(
    gap: tuple[_Token, ...],
    plan: tuple[tuple[str, ...] | None, int],
    text: str,
    captures: dict[str, str],
) -> None:
    """A gap's text shared by its captures, each as long as the later ones allow: the first
    takes all but what the rest need, one character a placeholder, none the splat."""
    names, need = plan
    captures[gap[0].text] = text[: len(text) - need]
    if names is not None:  # placeholders only (the common case): one character each
        captures.update(zip(names, text[len(text) - need :], strict=True))
        return
    position = len(text) - need
    for token in gap[1:]:
        size = token.kind == "placeholder"
        captures[token.text] = text[position : position + size]
        position += size


MAX_HOST = 253  # a DNS name's length
# cells: one rule costs well under 1 ms (4,096 cost ~0.9 ms, 100 such rules ~90 ms: review17)
MAX_HOST_TABLE = 1024


def _host_segment(tokens: tuple[_Token, ...], text: str) -> dict[str, str] | None:
    """A host whose captures mix ones that stop at ``.`` with ones that do not (a splat, or a
    placeholder the platform leaves unescaped): the table, within a budget. Past it (a Host
    longer than a DNS name, or a host of dozens of such captures) the rule does not match:
    a documented limit, where the platform's regular expression would backtrack."""
    if len(text) > MAX_HOST or len(tokens) * (len(text) + 1) > MAX_HOST_TABLE:
        return None
    return table_match(tokens, text)


def replace(value: str, captures: dict[str, str]) -> str:
    """``:name`` in ``value`` replaced by its capture (``:splat`` by the splat's); a name
    without one stays as written. One pass: ``:id`` never eats the start of ``:id_2``."""
    return PLACEHOLDER.sub(lambda found: captures.get(found[1], found[0]), value)


def replace_within(value: str, captures: dict[str, str], limit: int) -> str | None:
    """``replace(value, captures)``, or None when it would be longer than ``limit``: its size
    is summed first, as a line of 333 ``:splat`` and an 8 KB path make 2.7 MB (review17)."""
    size = len(value)
    for found in PLACEHOLDER.finditer(value):
        capture = captures.get(found[1])
        if capture is not None:
            size += len(capture) - len(found[0])
    return replace(value, captures) if size <= limit else None


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
