"""The regex automata one schema builds (numeric bounds, patterns, formats), built once per
distinct regex and counted against a budget.

Each bounded number or pattern is an automaton (regex_nfa.py): about 1,800 states, 4,000 units
of work and 5 ms of CPU for an unbounded-below ``number``, up to 60,000 states for a pattern.
States alone did not bound the CPU (a wide alternation under a star: 31k states in 1.7 s,
review39), so the budget counts the build's ``work`` (states made and visited), which does.
A lenient combinator intersects its siblings with every alternative, so ``{"maximum": k}`` in
240 alternatives was 240 automata (review32 #3: 9 s of the builder thread). The same regex is
built once per schema, and the work of those built is bounded: past ``MAX_AUTOMATON_WORK``
the schema is a 400 naming the keyword that crossed it, in strict and lenient mode alike.

The budget is per request, not per schema: 40 tools each just under it were 16 CPU-s of one
small request's parsing, on the model server's event loop. One ``Automata`` is shared by every
schema a request carries (its tools' parameters, ``response_format``, guided fields), and a
schema known to compile (``schema_check``) charges the work it took when it did (``charge``).
Each build is given what the request has left, and stops as soon as it passes that: a refused
pattern costs at most the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ember.models.constrain.automaton_budget import AutomatonBudgetExceeded
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA, AutomatonCache
from ember.models.constrain.regex_nfa import RegexAutomaton
from ember.models.constrain.regex_work import AutomatonWorkExceeded, pattern_units

# About 1 s of CPU: 0.6-2.4 µs a unit in every pattern family measured, long texts, wide
# classes and epsilon chains included (bench/regex_work.py, BENCHMARKS.md), where a state cost
# 1.7-7,700 µs: ~115 bounded numbers, or seven of the largest patterns; a pattern of more than
# 600,000 characters never fits (regex_work.UNITS_PER_CHAR).
MAX_AUTOMATON_WORK = 600_000

# What one budget covers, as its refusal says it.
PER_REQUEST = (
    "per request (every tool's parameters and the response format together; each distinct "
    "bound or pattern is one automaton)"
)

__all__ = ["MAX_AUTOMATON_WORK", "PER_REQUEST", "Automata", "AutomatonBudgetExceeded"]


class Automata:
    """One request's automata, by regex, and the work of those built so far (``states``: the
    budget's count, in units of ``RegexAutomaton.work``)."""

    def __init__(
        self,
        limit: int = MAX_AUTOMATON_WORK,
        scope: str = PER_REQUEST,
        cache: AutomatonCache = SHARED_AUTOMATA,
    ) -> None:
        self.limit = limit
        self.scope = scope  # what the budget covers, for its refusal
        # Where automata are found or built (automaton_cache.py): the process's, shared.
        self.cache = cache
        self.states = 0
        # Schemas (by ``schema_check.schema_key``) charged already: the same schema twice in
        # one request, or in one queued batch, builds nothing more the second time.
        self.charged: set[bytes] = set()
        self._built: dict[tuple[str, bool, tuple[int, int | None]], RegexAutomaton] = {}
        self._derived: dict[Hashable, Any] = {}
        # Every regex asked for, built or found: what one compile needs, whoever built it.
        self.used: set[tuple[str, bool, tuple[int, int | None]]] = set()

    def derived(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """What ``build`` makes from one of these automata (GLM's raw text: a liveness table
        as large as its automaton), built once per ``key``: each costs as much again as the
        automaton it is made from, which was itself built once."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]

    def regex(
        self,
        pattern: str,
        where: str,
        *,
        search: bool = False,
        length: tuple[int, int | None] = (0, None),
    ) -> RegexAutomaton:
        """``compile_regex``'s automaton, built once; ``where``: the keyword's path, named when
        this one passes the budget. Raises ``RegexError`` as ``compile_regex`` does."""
        key = (pattern, search, length)
        self.used.add(key)
        found = self._built.get(key)
        if found is not None:
            return found
        if self.states >= self.limit:
            raise self._exceeded(where)
        # Found in the process's cache or built (by the compile worker), it is charged alike;
        # built, it stops as soon as it takes more than what is left (review39: a refused
        # pattern cost seconds past the budget). Refused either way, the count is the one
        # before it: where a build stopped depends on how it was built, the refusal must not.
        left = self.limit - self.states
        # Refused unread, as its build would refuse it first thing (regex_nfa.py): and not sent
        # to the compile worker, whose job frame 6,000,000 astral characters passed (review41).
        if pattern_units(pattern) > left:
            raise self._exceeded(where, left)
        try:
            automaton = self.cache.automaton(key, where, budget=left)
        except AutomatonWorkExceeded:
            raise self._exceeded(where, left) from None
        if automaton.work > left:
            raise self._exceeded(where, left)
        self.states += automaton.work
        self._built[key] = automaton
        return automaton

    def release(self) -> None:
        """Let go of the automata and tables built (their states stay counted): a request keeps
        its budget from parsing to its GLM check, and would otherwise hold them, tens of MiB at
        the budget's size, for as long as it streams (review36)."""
        self._built.clear()
        self._derived.clear()

    def apart(self) -> Automata:
        """A cache of its own whose count starts at this one's, under the same limit: a schema
        compiled apart (to be memoized alone) is refused as the request's budget would refuse
        it, its message naming the request's limit and count (review35)."""
        other = Automata(self.limit, self.scope, self.cache)
        other.states = self.states
        return other

    def adopt(self, other: Automata) -> None:
        """Keep ``other``'s automata (and what was derived from them) for this one's later
        compiles, without counting them again: ``other`` was a schema compiled apart whose
        states were charged here already, and the request's next check of the same regexes
        (GLM's, constraints.py) should find them built, not build them twice (review35)."""
        for key, automaton in other._built.items():
            self._built.setdefault(key, automaton)
        for key, value in other._derived.items():
            self._derived.setdefault(key, value)

    def states_of(self, keys: set[tuple[str, bool, tuple[int, int | None]]]) -> int:
        """The work of these regexes' automata (each built here, or adopted)."""
        return sum(self._built[key].work for key in keys)

    def charge(self, states: int, where: str) -> None:
        """Count ``states`` (units of work) built elsewhere (a schema compiled on its own, or
        known to compile from an earlier request) against this budget; ``where``: that
        schema's path."""
        self.states += states
        if self.states > self.limit:
            raise self._exceeded(where)

    def _exceeded(self, where: str, left: int | None = None) -> AutomatonBudgetExceeded:
        """``left``: what was left when the regex at ``where`` needed more."""
        got = f"{self.states:,} units so far"
        if left is not None:
            got += f", and this one needs more than the {left:,} left"
        return AutomatonBudgetExceeded(
            where,
            f"schemas whose numeric bounds and patterns take at most {self.limit:,} units of "
            f"automaton work (pattern characters, class ranges, states built and visited) in "
            f"all, {self.scope}",
            got,
        )
