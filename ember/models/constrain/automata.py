"""The regex automata one schema builds (numeric bounds, patterns, formats), built once per
distinct regex and counted against a budget.

Each bounded number or pattern is an automaton (regex_nfa.py): about 1,600 states and 5 ms of
CPU for an unbounded-below ``number``, up to 20,000 states for a pattern. A lenient combinator
intersects its siblings with every alternative, so ``{"maximum": k}`` in 240 alternatives
was 240 automata (review32 #3: 9 s of the builder thread). The same regex is built once per
schema, and the states of those built are bounded: past ``MAX_AUTOMATON_STATES`` the schema
is a 400 naming the keyword that crossed it, in strict and lenient mode alike.

The budget is per request, not per schema: 40 tools each just under it were 16 CPU-s of one
small request's parsing, on the model server's event loop. One ``Automata`` is shared by every
schema a request carries (its tools' parameters, ``response_format``, guided fields), and a
schema known to compile (``schema_check``) charges the states it built when it did (``charge``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA, AutomatonCache
from ember.models.constrain.regex_nfa import RegexAutomaton

# About 1 s of CPU on the machine the budget was measured on (3-5 µs a state): 125 bounded
# numbers, or ten of the largest patterns.
MAX_AUTOMATON_STATES = 200_000

# What one budget covers, as its refusal says it.
PER_REQUEST = (
    "per request (every tool's parameters and the response format together; each distinct "
    "bound or pattern is one automaton)"
)


class AutomatonBudgetExceeded(InvalidRequestField):
    """A schema's automata passed ``MAX_AUTOMATON_STATES``: a 400 even where a keyword ember
    cannot use would be ignored (lenient), since ignoring it would not make the schema cheap."""


class Automata:
    """One request's automata, by regex, and the states built so far."""

    def __init__(
        self,
        limit: int = MAX_AUTOMATON_STATES,
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
        # Found in the process's cache or built (by the compile worker), it is charged alike.
        automaton = self.cache.automaton(key, where)
        self.states += len(automaton.edges)
        if self.states > self.limit:
            raise self._exceeded(where)
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
        """The states of these regexes' automata (each built here, or adopted)."""
        return sum(len(self._built[key].edges) for key in keys)

    def charge(self, states: int, where: str) -> None:
        """Count ``states`` built elsewhere (a schema compiled on its own, or known to compile
        from an earlier request) against this budget; ``where``: that schema's path."""
        self.states += states
        if self.states > self.limit:
            raise self._exceeded(where)

    def _exceeded(self, where: str) -> AutomatonBudgetExceeded:
        return AutomatonBudgetExceeded(
            where,
            f"schemas whose numeric bounds and patterns build at most {self.limit:,} automaton "
            f"states in all, {self.scope}",
            f"{self.states:,} states so far",
        )
