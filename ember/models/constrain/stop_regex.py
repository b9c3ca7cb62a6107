"""Stop regexes (SGLang's ``stop_regex``) as ember's own automata, compiled once per request.

SGLang runs ``re.search`` over the output after every token. In ember that was a request's own
pattern backtracking on text the client can steer: ``(a+)+b`` on a run of ``a`` takes 2**n
steps in Python's ``re`` and stalls the engine's step thread for every tenant, and each token
searched the whole text again (quadratic). Here a pattern is the automaton of
``constrain/regex_nfa.py`` in search mode (built in linear time, its states bounded, charged
to the request's automaton budget where the request is parsed), and a ``StopScan`` steps the
state set over each new character once: a token costs its own characters, never the text
before it.

Each character steps every live state of the set and unions their targets, so what a token
costs is bounded by the automata's states and edge targets: a request's stop regexes have at
most ``MAX_STOP_REGEX_STATES`` and ``MAX_STOP_REGEX_TARGETS`` in all (review40: 16 wide
patterns within the schema budget cost 142 ms of the event loop a token, and their memo of
state sets held ~3 GB; review42: ``(a?){124}`` within 512 states, ~100 µs a character). A scan
steps without the automaton's shared memo, with a bounded one of its own by character class;
at the caps a character costs ~20-35 µs here, against ~1 µs for ``Observation:|Final Answer:``.
They are built within a work budget of their own (``STOP_REGEX_WORK``), pattern by pattern, so
a list past the cap is refused where it passes it, not after every pattern was built within
the schemas' budget (review42: 16 patterns cost ~1 s of CPU, then a 400 naming that budget).

The dialect is the one ember's ``regex`` constraint takes (``STOP_REGEX_DIALECT``); a pattern
outside it is refused when the request arrives, naming the construct. Within it the stop
decision is ``re.search``'s, with three differences: ``\\d \\w \\s`` are ASCII classes,
``$`` is the end of the text only (Python's also matches before a final newline), and the
text searched starts where stopping may start (``min_new_tokens``), so ``^`` anchors there.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from ember.errors import UserError
from ember.models.constrain.automata import Automata
from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA, AutomatonCache
from ember.models.constrain.regex_nfa import RegexAutomaton, StateSet

# All of one request's stop regexes together: what each character of output may step. Ample
# for stop patterns (``\n\n+``, ``Observation:|Final Answer:``: tens of states each).
MAX_STOP_REGEX_STATES = 512
# And the states their edges lead to, counted per edge: a step unions the targets of every
# live state, so ``(a?){124}`` (512 states, but 7,880 targets) cost ~100 µs a character.
MAX_STOP_REGEX_TARGETS = 4 * MAX_STOP_REGEX_STATES
# (character class, state) targets a scan keeps, per state of its automaton (and a floor):
# a request's scans keep at most ~8,000 in all (its states are capped), ~1 MB.
KEPT_TARGETS_PER_STATE = 8
KEPT_TARGETS_FLOOR = 256
# The work (``RegexAutomaton.work``) they may take to build, ~10 ms here: 512 states took at most
# ~4,200 units in every shape tried (``(a?){124}``, ``[^\0]{246}``, 16 literal words).
STOP_REGEX_WORK = 16 * MAX_STOP_REGEX_STATES
STOP_REGEX_LIMIT = (
    f"stop regexes whose automata have at most {MAX_STOP_REGEX_STATES} states and "
    f"{MAX_STOP_REGEX_TARGETS:,} edge targets in all, built "
    f"within {STOP_REGEX_WORK:,} units of automaton work (every character of the output "
    "steps each state)"
)

STOP_REGEX_DIALECT = (
    "a regular expression in ember's linear-time dialect (literals, escapes, '.', classes, "
    "ASCII \\d \\w \\s, quantifiers, groups, alternation, '^' and '$' at the ends; no "
    "backreferences, lookaround, word boundaries, inline flags or atomic groups)"
)


@dataclass(frozen=True, slots=True)
class StopRegex:
    """One stop pattern and its automaton (equal by pattern: the automaton is its function).
    ``bounds``: where the automaton's character classes start and end, sorted; two characters
    between the same two bounds are taken by the same edges (a scan's cache key)."""

    pattern: str
    automaton: RegexAutomaton = field(compare=False, repr=False)
    bounds: tuple[int, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Each class once (a repeated one is the same object on every copy's edge): the work
        # is then its ranges, which the build charged (``[...1,000 ranges...]{200}`` walked
        # 200,000 of them, review43).
        classes = {id(chars): chars for row in self.automaton.edges for chars, _ in row}
        cuts = {
            cut
            for chars in classes.values()
            for low, high in chars.ranges
            for cut in (low, high + 1)
        }
        object.__setattr__(self, "bounds", tuple(sorted(cuts)))


def compile_stop_regex(pattern: str) -> StopRegex:
    """One pattern's search automaton, within the stop regexes' caps (``StopRegexBuild``).
    Raises ``RegexError`` (outside the dialect) or ``StopRegexesTooLarge``."""
    return StopRegexBuild().add(pattern, "stop_regex")


def edge_targets(automaton: RegexAutomaton) -> int:
    """The states its edges lead to, counted per edge: what a step may union."""
    return sum(len(target) for row in automaton.edges for _, target in row)


def over_cap(states: int, targets: int) -> str | None:
    """How stop regexes of these sizes pass the cap, or None within it."""
    if states > MAX_STOP_REGEX_STATES:
        return f"{states} states"
    if targets > MAX_STOP_REGEX_TARGETS:
        return f"{targets:,} edge targets"
    return None


class StopRegexesTooLarge(UserError):
    """A request's stop regexes passed ``MAX_STOP_REGEX_STATES`` or ``STOP_REGEX_WORK``
    (``got``: how far, and at which pattern); the caller names its field."""

    def __init__(self, got: str) -> None:
        self.got = got
        super().__init__(f"{STOP_REGEX_LIMIT}, got {got}")


class StopRegexBuild:
    """One request's stop regexes, built one after the other within ``STOP_REGEX_WORK`` in
    all and refused (``StopRegexesTooLarge``) as soon as their states or work pass the cap."""

    def __init__(self, cache: AutomatonCache = SHARED_AUTOMATA) -> None:
        self._automata = Automata(STOP_REGEX_WORK, "for the stop regexes", cache)
        self.compiled: list[StopRegex] = []
        self.states = 0
        self.targets = 0

    @property
    def work(self) -> int:
        """The work of the automata built so far (the request's budget counts it too)."""
        return self._automata.states

    def add(self, pattern: str, where: str) -> StopRegex:
        """``pattern``'s search automaton; raises ``RegexError`` for a pattern outside the
        dialect, ``StopRegexesTooLarge`` past the cap."""
        index = len(self.compiled)
        try:
            automaton = self._automata.regex(pattern, where, search=True)
        except AutomatonBudgetExceeded:
            raise StopRegexesTooLarge(
                f"more than {STOP_REGEX_WORK:,} units of work by pattern {index}"
            ) from None
        self.states += len(automaton.edges)
        self.targets += edge_targets(automaton)
        over = over_cap(self.states, self.targets)
        if over:
            raise StopRegexesTooLarge(f"{over} by pattern {index}")
        regex = StopRegex(pattern, automaton)
        self.compiled.append(regex)
        return regex


class StopScan:
    """Where one stop regex stands in the text seen so far: its automaton's state set."""

    __slots__ = ("regex", "_states", "_targets", "_kept", "_most")

    def __init__(self, regex: StopRegex) -> None:
        self.regex = regex
        self._states: StateSet = regex.automaton.start
        # By character class (``StopRegex.bounds``), then state: the state's targets on that
        # class (None: no edge takes it), found the first time that state meets it. A step is
        # then a bisect, and a lookup and a union per live state, not a class test per edge
        # (review42: ~3-4x at the cap); a text of ever new characters (Chinese) falls into a
        # few classes. Bounded: past ``_most`` entries nothing more is kept, and a target not
        # kept is found as the reference finds it (clearing them all made a text cycling
        # through many classes 5x slower than the reference, review43).
        self._targets: dict[int, dict[int, StateSet | None]] = {}
        self._kept = 0
        self._most = KEPT_TARGETS_FLOOR + KEPT_TARGETS_PER_STATE * len(regex.automaton.edges)

    def feed(self, text: str) -> tuple[bool, int]:
        """Step over ``text`` (the characters new since the last call): whether a match now
        ends within the text seen (search mode: a match with no ``$`` stays accepted), and
        the characters stepped. A dead set (``^`` failed) steps no more."""
        automaton, states, steps = self.regex.automaton, self._states, 0
        edges, known, bounds = automaton.edges, self._targets, self.regex.bounds
        for char in text:
            if not states:
                break
            # Stepped here, not by ``automaton.step``: its memo is the automaton's, shared
            # by every request, and keyed by whole state sets.
            code_point = ord(char)
            kind = bisect_right(bounds, code_point)
            column = known.get(kind)
            if column is None:
                column = _NOT_KEPT if self._kept >= self._most else known.setdefault(kind, {})
            after: set[int] = set()
            for state in states:
                target = column.get(state, _UNKNOWN)
                if target is _UNKNOWN:
                    target = None
                    for chars, each in edges[state]:
                        if code_point in chars:
                            target = each if target is None else target | each
                    if self._kept < self._most:
                        column[state] = target
                        self._kept += 1
                if target:
                    after |= target
            states = frozenset(after)
            steps += 1
        self._states = states
        return automaton.accepts(states), steps


# A column for a class first met once the scan keeps no more: shared, and never written to.
_NOT_KEPT: dict[int, StateSet | None] = {}
_UNKNOWN = object()


def step_reference(automaton: RegexAutomaton, states: StateSet, text: str) -> StateSet:
    """The slow reference of ``StopScan.feed``: each edge's class tested for each character."""
    for char in text:
        code_point, after = ord(char), set()
        for state in states:
            for chars, target in automaton.edges[state]:
                if code_point in chars:
                    after |= target
        states = frozenset(after)
    return states
