"""What building a regex automaton costs (regex_nfa.py), counted as it is built: the unit the
request's automaton budget is charged in (automata.py), since states alone did not track the
CPU (review39: 2-175 µs a state across pattern families), nor did states and closure visits
without the pattern's text and classes (review41: 69 µs a unit for empty groups in a row, 3 ms
and 300 KB held for a class of many code points). Counting all of them: 0.6-2.4 µs and
0-111 bytes held a unit across 27 families (bench/regex_work.py, BENCHMARKS.md)."""

from __future__ import annotations

from ember.errors import UserError

# How often (in units of work) a closure computation checks the budget: a refused pattern costs
# at most this much past it.
CHECK_EVERY = 4096
# States visited computing closures per unit of work: a visit is a few set operations, a state
# made (a row of lists, a product copy, a liveness pass, an edge kept) ~10x more
# (bench/regex_work.py fits both).
VISITS_PER_UNIT = 8
# Units per character of a pattern, charged before any of it is read: parsing is linear in the
# pattern (0.4-2 µs a character, by construct, about a unit's CPU), and a pattern longer than
# what the request has left is refused unread (review41: a 1,000,000-character literal took 6.4
# CPU-s to parse before its build was refused, and a class of 20,000 code points cost 7 units).
UNITS_PER_CHAR = 1
# Units per range of each character class parsed, once it is made: sorted and merged to make it,
# then held by the automaton (and the process's cache) at ~100 bytes a range (review41: a class
# of 20,000 single code points, 7 units, held ~2 MB).
UNITS_PER_RANGE = 1


# And one more an alternative, as the parse opens it: it costs its parse node, its anchors'
# scan and its branch (review44: "|" * 590,000 took 2.5 CPU-s within the budget, ~4 µs a
# unit). Not a "|" of the text: an escaped one is one literal character (review45).
UNITS_PER_BAR = 1


def pattern_units(pattern: str) -> int:
    """What reading ``pattern`` is charged before it is parsed."""
    return len(pattern) * UNITS_PER_CHAR


class AutomatonWorkExceeded(UserError):
    """The build's work passed the ``budget`` it was given (``work``: as far as it got)."""

    def __init__(self, work: int, budget: int) -> None:
        self.work = work
        self.budget = budget
        super().__init__(
            f"the automaton needs more than {budget:,} units of work ({work:,} so far)"
        )


class WorkCounter:
    """The build's work counter, refused past ``budget``."""

    __slots__ = ("done", "budget")

    def __init__(self, budget: int | None) -> None:
        self.done = 0
        self.budget = budget

    def add(self, units: int) -> None:
        self.done += units
        if self.budget is not None and self.done > self.budget:
            raise AutomatonWorkExceeded(self.done, self.budget)
