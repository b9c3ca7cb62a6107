"""A regex tree to an automaton over code points, stepped as sets of states (determinised
lazily, like the grammar above it).

Thompson's construction gives states joined by epsilon moves and by edges labelled with a
``CharSet``. Each edge's target is stored as its epsilon closure restricted to the states that
matter (those with edges, and the final one), so a matcher state is a small frozenset and equal
positions compare equal. States that cannot reach the final state are cut away: every state a
matcher can be in can still complete, which is what keeps token masks from leading the model
into a dead end.

``{n,m}`` is expanded into copies; the total is bounded (``MAX_STATES``) and a pattern past it
raises ``RegexError`` naming the quantifier that blew it up. Length bounds (JSON Schema's
``minLength``/``maxLength`` beside a ``pattern``) are part of the automaton: a product with a
character counter, trimmed like the rest.

States alone do not measure the cost: a wide alternation under a star gives every state a
target set of hundreds of states (review39: 31k states, 1.7 s), and a pattern's text and its
classes cost apart from its states (review41: a class of 20,000 code points was 6 states). The
build counts its ``work`` (the pattern's characters, charged before it is read; its classes'
ranges; states made; states visited computing closures; edges kept: regex_work.py), which
tracks its CPU and its memory within a small factor across pattern families (BENCHMARKS.md),
and stops with ``AutomatonWorkExceeded`` as soon as the work passes the ``budget`` it was
given.
"""

from __future__ import annotations

from ember.models.constrain.charset import ANY, CharSet
from ember.models.constrain.regex_anchors import split_anchors
from ember.models.constrain.regex_automaton import (
    MAX_MEMO,
    UNRESOLVED,
    RegexAutomaton,
    StateSet,
)
from ember.models.constrain.regex_literals import literal_strings, trie_automaton
from ember.models.constrain.regex_syntax import (
    Alt,
    Chars,
    Concat,
    Regex,
    RegexError,
    Repeat,
    parse_regex,
)
from ember.models.constrain.regex_work import (
    CHECK_EVERY,
    VISITS_PER_UNIT,
    AutomatonWorkExceeded,
    WorkCounter,
    pattern_units,
)

__all__ = [
    "MAX_MEMO",
    "UNRESOLVED",
    "AutomatonWorkExceeded",
    "RegexAutomaton",
    "StateSet",
    "compile_regex",
]

MAX_STATES = 20_000
# With minLength/maxLength beside a pattern: the pattern's states times the counts that matter.
MAX_PRODUCT_STATES = 60_000


def _lengths(tree: Regex) -> tuple[int, int | None]:
    """The shortest and longest match of ``tree`` in characters (None: unbounded)."""
    if isinstance(tree, Chars):
        return 1, 1
    if isinstance(tree, Concat | Alt):
        parts = [_lengths(t) for t in tree.items] or [(0, 0)]
        lows = [lo for lo, _ in parts]
        highs = [hi for _, hi in parts if hi is not None]
        bounded = len(highs) == len(parts)
        if isinstance(tree, Concat):
            return sum(lows), sum(highs) if bounded else None
        return min(lows), max(highs) if bounded else None
    assert isinstance(tree, Repeat)
    low, high = _lengths(tree.item)
    if high == 0:
        return 0, 0
    longest = None if tree.maximum is None or high is None else tree.maximum * high
    return tree.minimum * low, longest


def _needed_bounds(tree: Regex, bounds: tuple[int, int | None]) -> tuple[int, int | None]:
    """The length bounds the pattern does not already imply (``^[a-z]{1,60}$`` with maxLength
    255 needs no counter: every match is short enough)."""
    low, high = bounds
    shortest, longest = _lengths(tree)
    if shortest >= low:
        low = 0
    if high is not None and longest is not None and longest <= high:
        high = None
    return low, high


def _size(tree: Regex, pattern: str) -> int:
    """States the construction will make (bounded before building anything)."""
    if isinstance(tree, Chars):
        return 2
    if isinstance(tree, Concat | Alt):
        return 2 + sum(_size(t, pattern) for t in tree.items)
    assert isinstance(tree, Repeat)
    copies = max(tree.minimum, tree.maximum or tree.minimum + 1, 1)
    total = 2 + copies * (_size(tree.item, pattern) + 2)
    if total > MAX_STATES:
        raise RegexError(
            "quantifier",
            tree.offset,
            pattern,
            f"the pattern would need more than {MAX_STATES} automaton states; "
            "use smaller repetition counts",
        )
    return total


class _Builder:
    def __init__(self) -> None:
        self.edges: list[list[tuple[CharSet, int]]] = []
        self.eps: list[list[int]] = []

    def state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, tree: Regex) -> tuple[int, int]:
        """A fragment ``(entry, exit)`` for ``tree``."""
        entry, exit_ = self.state(), self.state()
        if isinstance(tree, Chars):
            self.edges[entry].append((tree.chars, exit_))
        elif isinstance(tree, Concat):
            at = entry
            for item in tree.items:
                a, b = self.build(item)
                self.eps[at].append(a)
                at = b
            self.eps[at].append(exit_)
        elif isinstance(tree, Alt):
            for item in tree.items:
                a, b = self.build(item)
                self.eps[entry].append(a)
                self.eps[b].append(exit_)
        else:
            assert isinstance(tree, Repeat)
            at = entry
            for _ in range(tree.minimum):
                a, b = self.build(tree.item)
                self.eps[at].append(a)
                at = b
            if tree.maximum is None:  # then any number more
                a, b = self.build(tree.item)
                self.eps[at].append(a)
                self.eps[b].append(a)
                self.eps[b].append(exit_)
            else:  # then up to (maximum - minimum) more, each optional
                for _ in range(tree.maximum - tree.minimum):
                    a, b = self.build(tree.item)
                    self.eps[at].append(a)
                    self.eps[at].append(exit_)
                    at = b
            self.eps[at].append(exit_)
        return entry, exit_


def _with_length(
    edges: list[list[tuple[CharSet, int]]],
    eps: list[list[int]],
    entry: int,
    final: int,
    bounds: tuple[int, int | None],
    pattern: str,
    work: WorkCounter,
) -> tuple[list[list[tuple[CharSet, int]]], list[list[int]], int, int]:
    """The product with a character counter, so that the match is also ``low..high``
    characters long: trimming the product then leaves no state whose pattern could only
    complete too late or too early (a bound checked apart from the pattern could strand a
    matcher that used up its room before the pattern was satisfied)."""
    low, high = bounds
    top = high if high is not None else low  # counts past ``low`` matter only up to ``high``
    n = len(edges)
    if n * (top + 1) + 1 > MAX_PRODUCT_STATES:
        raise RegexError(
            "pattern with minLength/maxLength",
            0,
            pattern,
            f"together they would need more than {MAX_PRODUCT_STATES} automaton states",
        )
    work.add(n * (top + 1) + 1)  # before building any of them

    def at(s: int, k: int) -> int:
        return k * n + s

    new_edges: list[list[tuple[CharSet, int]]] = [[] for _ in range(n * (top + 1) + 1)]
    new_eps: list[list[int]] = [[] for _ in range(n * (top + 1) + 1)]
    new_final = n * (top + 1)
    for k in range(top + 1):
        for s in range(n):
            new_eps[at(s, k)] = [at(t, k) for t in eps[s]]
            if high is None or k < high:
                after = min(k + 1, top)
                new_edges[at(s, k)] = [(c, at(t, after)) for c, t in edges[s]]
        if k >= low:
            new_eps[at(final, k)].append(new_final)
    return new_edges, new_eps, at(entry, 0), new_final


def _automaton(
    tree: Regex,
    pattern: str,
    bounds: tuple[int, int | None],
    work: WorkCounter,
) -> RegexAutomaton:
    work.add(_size(tree, pattern))  # before building any of them
    bounds = _needed_bounds(tree, bounds)
    builder = _Builder()
    entry, final = builder.build(tree)
    edges, eps = builder.edges, builder.eps
    if bounds != (0, None):
        edges, eps, entry, final = _with_length(edges, eps, entry, final, bounds, pattern, work)
    n = len(edges)
    # Live states: those from which the final state is reachable.
    back: list[list[int]] = [[] for _ in range(n)]
    for s in range(n):
        for chars, t in edges[s]:
            if chars:  # an empty class takes nothing: its edge leads nowhere
                back[t].append(s)
        for t in eps[s]:
            back[t].append(s)
    live = {final}
    todo = [final]
    while todo:
        for s in back[todo.pop()]:
            if s not in live:
                live.add(s)
                todo.append(s)
    if entry not in live:
        raise RegexError("a pattern that matches no string", 0, pattern)
    important = {s for s in live if edges[s]} | {final}

    closures: dict[int, StateSet] = {}
    # Equal closures are one object (review39: value-equal sets made apart per state held
    # 7.9 KB a state), and a state that only passes on to one other shares that one's closure.
    interned: dict[StateSet, StateSet] = {}
    pending = 0.0  # work not yet added to ``work``

    def spend(units: float) -> None:
        nonlocal pending
        pending += units
        if pending >= CHECK_EVERY:
            work.add(int(pending))
            pending -= int(pending)

    def closure(s: int) -> StateSet:
        found = closures.get(s)
        if found is not None:
            return found
        # States whose closure is the next one's: not important, one live move. A set, and
        # charged as visits: tested in a list, and free, "()" * 32,000 took 17.6 CPU-s for
        # 64,000 units (review41).
        chain: dict[int, None] = {}
        while s not in important and s not in closures and len(eps[s]) == 1:
            nxt = eps[s][0]
            if nxt not in live or nxt in chain or nxt == s:
                break
            chain[s] = None
            s = nxt
        if chain:
            spend(len(chain) / VISITS_PER_UNIT)
        found = closures.get(s)
        if found is None:
            seen, todo, keep = {s}, [s], set()
            while todo:
                u = todo.pop()
                if u in important:
                    keep.add(u)
                for v in eps[u]:
                    if v in live and v not in seen:
                        seen.add(v)
                        todo.append(v)
            frozen = frozenset(keep)
            found = closures[s] = interned.setdefault(frozen, frozen)
            spend(len(seen) / VISITS_PER_UNIT)
        for c in chain:
            closures[c] = found
        return found

    compiled: list[tuple[tuple[CharSet, StateSet], ...]] = [()] * n
    for s in important:
        row = tuple((c, closure(t)) for c, t in edges[s] if t in live and c)
        compiled[s] = row
        spend(len(row))
    start = closure(entry)
    work.add(round(pending))
    return RegexAutomaton(pattern, start, final, compiled, work.done)


def compile_regex(
    pattern: str,
    *,
    search: bool = False,
    length: tuple[int, int | None] = (0, None),
    budget: int | None = None,
) -> RegexAutomaton:
    """The automaton for ``pattern``. ``search=False``: the whole text must match (SGLang's and
    vLLM's ``regex``); ``search=True``: the text must contain a match (JSON Schema's
    ``pattern``), so an alternative without ``^`` may be preceded, and one without ``$``
    followed, by any text. ``length``: the text is also that many characters long (JSON
    Schema's ``minLength``/``maxLength``; ``None``: unbounded). ``budget``: the most work it
    may take, else ``AutomatonWorkExceeded`` as soon as it passes it (None: unbounded; the
    pattern's characters count first: one too long is refused unread). Raises ``RegexError``."""
    work = WorkCounter(budget)
    work.add(pattern_units(pattern))
    tree = parse_regex(pattern, work)
    split = split_anchors(tree, pattern)
    if not search and length == (0, None):
        # Only literals (a choice list): their trie, linear in the characters (regex_literals).
        strings = literal_strings([body for _, body, _ in split])
        if strings is not None:
            start_set, final, edges = trie_automaton(strings, work)
            return RegexAutomaton(pattern, start_set, final, edges, work.done)
    branches = []
    anything = Repeat(Chars(ANY), 0, None, 0)
    for start, body, end in split:
        items = [body]
        if search and not start:
            items.insert(0, anything)
        if search and not end:
            items.append(anything)
        branches.append(Concat(tuple(items)))
    tree = branches[0] if len(branches) == 1 else Alt(tuple(branches))
    return _automaton(tree, pattern, length, work)
