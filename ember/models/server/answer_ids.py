"""The ids ``/abort_request`` finds a request by, from the moment its route has parsed it until
its answer ends, so that an abort reaches it wherever it is: still being taken in (its prompt
tokenized in a worker thread), waiting for its grammar or for its id to drain, or in the engine.

A request is registered (``open``) under its engine id (SGLang's body ``rid``, or the route's
own) and under its answer's id where that differs (vLLM's ``chatcmpl-<x-request-id>``,
``caller_id.answer_id``: the engine's id stays ember's own, since callers may send the same
header twice). Either id ends every choice of ``n``, as SGLang aborts every child of a parent
rid; a choice's own id, ``<id>-<i>`` under either, ends choice ``i`` alone. With ``n`` > 1 a
choice is also found by SGLang's name for it, ``<engine id>_<i>`` (``_0`` included: SGLang's
``GenerateReqInput._normalize_rid`` names the children of rid ``R`` ``R_0``, ``R_1``, ... and
``/generate`` reports that name in ``meta_info.id``), so an SGLang client's abort of a child
reaches it. SGLang likewise registers a rid as the request arrives, so its abort is never lost
in the intake window.

An abort marks the request (``AbortTicket.aborted``) and returns the engine ids to abort there;
``stream_generation`` reads the mark right before it submits a choice to the engine, with no
await between, as ``draining.py`` does for a request waiting for its id: whatever the abort
missed in the engine it catches there. The route's ``finally`` closes the ticket; a ticket
dropped unclosed (an answer whose stream never started: its client left first) is released
when it is collected.

Who can abort is unchanged: ``/abort_request`` has always taken ``abort_all`` from any caller
that reaches it (SGLang's is unauthenticated beyond the server's API key too). The AI gateway
sends its own random 128-bit id as ``x-request-id`` (dropping a tenant's) and does not forward
``/abort_request``, so a tenant can neither guess nor send one.

Routes open and close, ``/abort_request`` marks, all on the event loop; but a ticket in a
reference cycle is collected (and released) in whichever thread the cyclic GC runs, the engine's
or a tokenizing worker's, so the table takes its own lock. A release takes no lock: the cyclic GC
runs inside any allocation, including those made under the table's lock by the thread that
holds it, which would then wait for itself forever (review31). A release is queued instead, and
every method takes the queued releases out under the lock before it reads the table. (Not a
reentrant lock: a release would then change the table while ``abort`` iterates over it.)
"""

from __future__ import annotations

import queue
import threading
import weakref


class _Entry:
    """One request as the table holds it (the ticket holds it too): its choices' engine ids
    and which of them were aborted."""

    __slots__ = ("request_id", "n", "choices", "every")

    def __init__(self, request_id: str, n: int) -> None:
        self.request_id, self.n = request_id, n
        self.choices: set[int] = set()  # choices aborted by their own id
        self.every = False  # aborted as a whole (its id, its answer's, abort_all)

    def engine_id(self, choice: int) -> str:
        """Choice ``i``'s engine id (``choices.choice_inputs``)."""
        return self.request_id if choice == 0 else f"{self.request_id}-{choice}"

    def mark(self, choice: int | None) -> list[str]:
        if choice is None:
            self.every = True
            return [self.engine_id(i) for i in range(self.n)]
        self.choices.add(choice)
        return [self.engine_id(choice)]


class AbortTicket:
    """A request's registration, held by its ``GenerationInput`` (every choice's)."""

    __slots__ = ("_entry", "_release", "__weakref__")

    def __init__(self, table: AnswerIds, entry: _Entry, keys: list[tuple[str, int | None]]):
        self._entry = entry
        self._release = weakref.finalize(self, table._released.put, (entry, keys))

    def aborted(self, choice: int) -> bool:
        """Whether an abort reached choice ``choice`` (or the whole request)."""
        return self._entry.every or choice in self._entry.choices

    def aborted_whole(self) -> bool:
        """Whether an abort named the whole request (its id, its answer's, ``abort_all``), not
        one choice: SGLang's ``R_0`` ends choice 0 alone though its engine id is ``R``."""
        return self._entry.every

    def close(self) -> None:
        """The answer ended: its ids no longer find it. Idempotent."""
        self._release()


class AnswerIds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # id -> (request, the choice the id names; None: every choice)
        self._ids: dict[str, list[tuple[_Entry, int | None]]] = {}
        # Tickets closed or collected, not yet out of ``_ids``: SimpleQueue.put is safe to call
        # from a finalizer, in any thread, even one inside this table's lock.
        self._released: queue.SimpleQueue[tuple[_Entry, list[tuple[str, int | None]]]] = (
            queue.SimpleQueue()
        )

    def open(self, request_id: str, answer_id: str | None, n: int) -> AbortTicket:
        """Register a request of ``n`` choices under its engine id and, where it differs, its
        answer's id; each choice ``i`` >= 1 also under ``<id>-<i>``, and with ``n`` > 1 each
        choice under SGLang's ``<engine id>_<i>`` (``names``)."""
        entry = _Entry(request_id, n)
        keys = names(request_id, answer_id, n)
        with self._lock:
            self._drain()
            for key, choice in keys:
                self._ids.setdefault(key, []).append((entry, choice))
        return AbortTicket(self, entry, keys)

    def _drain(self) -> None:
        """Take the released tickets' ids out of the table; called with the lock held."""
        while True:
            try:
                entry, keys = self._released.get_nowait()
            except queue.Empty:
                return
            for key, choice in keys:
                held = self._ids.get(key)
                if held is None:
                    continue
                held[:] = [pair for pair in held if pair != (entry, choice)]
                if not held:
                    del self._ids[key]

    def abort(self, key: str) -> list[str]:
        """Mark the requests ``key`` names (see the module docstring); the engine ids to abort."""
        out: list[str] = []
        with self._lock:
            self._drain()
            for entry, choice in self._ids.get(key, ()):
                out += entry.mark(choice)
        return list(dict.fromkeys(out))

    def abort_all(self) -> None:
        """Mark every registered request (``abort_all``: the engine aborts those it holds)."""
        with self._lock:
            self._drain()
            for held in self._ids.values():
                for entry, _ in held:
                    entry.every = True

    def holds(self, name: str) -> bool:
        """Whether a registered request is found by ``name`` (any id ``open`` registered: an
        engine id, an answer's id, a choice's): a new rid that is one of them would be aborted
        with that request, or abort it."""
        with self._lock:
            self._drain()
            return name in self._ids

    def __len__(self) -> int:
        """The requests registered."""
        with self._lock:
            self._drain()
            return len({id(entry) for held in self._ids.values() for entry, _ in held})


def sglang_choice_id(request_id: str, choice: int) -> str:
    """SGLang's name for choice ``choice`` of a request of ``n`` > 1 choices under
    ``request_id`` (``GenerateReqInput._normalize_rid``)."""
    return f"{request_id}_{choice}"


def names(request_id: str, answer_id: str | None, n: int) -> list[tuple[str, int | None]]:
    """Every id a request of ``n`` choices is found by, each with the choice it names (None:
    every choice): the engine id and the answer's id, ``<id>-<i>`` under each for choice ``i``
    >= 1, and with ``n`` > 1 SGLang's ``<engine id>_<i>`` for every choice."""
    bases = [request_id] if answer_id in (None, request_id) else [request_id, answer_id]
    keys: list[tuple[str, int | None]] = [(base, None) for base in bases]
    keys += [(f"{base}-{i}", i) for i in range(1, n) for base in bases]
    if n > 1:
        keys += [(sglang_choice_id(request_id, i), i) for i in range(n)]
    return keys
