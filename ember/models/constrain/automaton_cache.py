"""Regex automata by regex, kept for the whole process and built by the compile worker.

A request's schemas are compiled three times over in the model server: when the request is
parsed (its 400s), by GLM's check of its tool values, and by the grammar builder's thread; each
with an ``Automata`` of its own, which built every regex again, and every distinct schema built
its own. ``Automata.regex`` asks this cache first, by ``(pattern, search, length)``: an
automaton is a pure function of that key, so sharing it changes no answer, only how soon it
comes. What it does not hold it has built by the compile worker when one is attached (the
model server attaches one while it serves: compile_client.py), else in this process.

The budget does not change with it: ``Automata`` charges a request the work of every distinct
regex it uses, found here or built (automata.py); a build is given what the request has left.
A compile that took the worker before its last ``detach_worker`` and asks it after is refused
by the stopped worker (compile_client.py) and built here instead: a stopped worker is never
started again. The cache is bounded by the work of the automata it holds
(``CAPACITY_WORK``), the least recently used dropped first; one larger than the whole bound
serves its caller and is not kept. Work, not states: it tracks their memory too (0-111 bytes
a unit in every family measured, where a state held 30 bytes to 400 KB: optional items in a
row make closures quadratic in few states, and a class of 20,000 code points is one edge of
~2 MB, charged by its ranges: review41).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ember.models.constrain.compile_client import CompileLimits, CompileWorker, CompileWorkerStopped
from ember.models.constrain.regex_nfa import RegexAutomaton, compile_regex

RegexKey = tuple[str, bool, tuple[int, int | None]]

# Two requests' budgets (automata.py MAX_AUTOMATON_WORK): a request's automata stay from its
# intake to its grammar build. 30-110 bytes a unit built here (closures shared), a choice
# list's trie up to ~180 (a node's own target set, review44), much less decoded from the
# worker until its states are reached (up to 160 once all are): ~100 MB, ~210 MB at the worst,
# in a process that may build them itself (the supervisor).
CAPACITY_WORK = 1_200_000


class AutomatonCache:
    """See the module docstring. Thread-safe: the intake threads, the grammar builder's and
    the engine's all read it."""

    def __init__(self, capacity: int = CAPACITY_WORK) -> None:
        self.capacity = capacity  # units of work (regex_nfa.py)
        self._kept: OrderedDict[RegexKey, RegexAutomaton] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._worker: CompileWorker | None = None
        self._users = 0

    @property
    def held(self) -> int:
        """The work of the automata kept."""
        return self._held

    def __contains__(self, key: object) -> bool:
        """Whether ``key``'s automaton is kept (found without building)."""
        with self._lock:
            return key in self._kept

    @property
    def worker(self) -> CompileWorker | None:
        return self._worker

    def automaton(self, key: RegexKey, where: str, *, budget: int | None = None) -> RegexAutomaton:
        """The automaton for ``key``, built if need be, with at most ``budget`` units of work
        (regex_nfa.py); raises what ``compile_regex`` raises (and, with a worker,
        compile_client's errors) naming ``where``. Found here, it is returned whatever its
        work: the caller charges it."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
            worker = self._worker
        pattern, search, length = key
        built = None
        if worker is not None:
            try:
                built = worker.compile(pattern, where, search=search, length=length, budget=budget)
            except CompileWorkerStopped:
                pass  # detached meanwhile: built here, as with no worker
        if built is None:
            built = compile_regex(pattern, search=search, length=length, budget=budget)
        self._keep(key, built)
        return built

    def _keep(self, key: RegexKey, built: RegexAutomaton) -> None:
        size = built.work
        if size > self.capacity:
            return
        with self._lock:
            if key in self._kept:  # built twice at once: keep the first
                return
            self._kept[key] = built
            self._held += size
            while self._held > self.capacity:
                _, dropped = self._kept.popitem(last=False)
                self._held -= dropped.work

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._held = 0

    def attach_worker(self, limits: CompileLimits | None = None) -> None:
        """Have regexes built by a compile worker from now on (one per process, started at its
        first job), until every ``attach_worker`` has had its ``detach_worker``."""
        with self._lock:
            self._users += 1
            if self._worker is None:
                self._worker = CompileWorker(limits)

    def detach_worker(self) -> None:
        """The last detach stops the worker; regexes are built in this process again."""
        with self._lock:
            self._users = max(self._users - 1, 0)
            worker = self._worker if self._users == 0 else None
            if worker is not None:
                self._worker = None
        if worker is not None:
            worker.stop()


# One per process, as the memo of a pure function (like schema_check.KNOWN_SCHEMAS): every
# Automata, whoever makes it, finds what any other built.
SHARED_AUTOMATA = AutomatonCache()
