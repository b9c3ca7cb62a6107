"""The matcher: a pushdown machine over grammar nodes, determinised lazily.

A matcher state is a frozenset of stacks (each a tuple of ``(node, local)`` frames); several
stacks mean the input so far is still ambiguous (``anyOf``, an optional property). The empty
stack ``()`` in a state means the grammar is complete there.

``advance(state, sym)`` is the plain definition (also the slow reference the tests compare
against). ``Grammar`` numbers the states it meets and memoises transitions, so that once a
state has been seen, stepping it is a dict lookup: a lazily built DFA. Everything cached per
state (transitions, token masks) lives in the ``Grammar`` and is dropped together when the
table grows past ``max_states``; callers keep the state itself (a value) and re-intern it.
"""

from __future__ import annotations

from ember.models.constrain.nodes import (
    BECOME,
    CONSUME,
    CONSUME_POP,
    END,
    POP,
    PUSH,
    Node,
)

State = frozenset
DEAD = -1
MAX_EPSILON_DEPTH = 64
EMPTY: State = frozenset()
COMPLETE: State = frozenset({()})


def _feed(stack: tuple, sym: int, out: set, depth: int) -> None:
    if not stack:
        if sym == END:
            out.add(())
        return
    if depth > MAX_EPSILON_DEPTH:
        return  # a cycle of moves that take no input: this path cannot make progress
    node, local = stack[-1]
    rest = stack[:-1]
    for move in node.step(local, sym):
        kind = move[0]
        if kind == CONSUME:
            out.add(rest + ((node, move[1]),))
        elif kind == CONSUME_POP:
            out.add(rest)
        elif kind == PUSH:
            _feed(rest + ((node, move[1]), move[2]), sym, out, depth + 1)
        elif kind == BECOME:
            _feed(rest + (move[1],), sym, out, depth + 1)
        elif kind == POP:
            _feed(rest, sym, out, depth + 1)


def advance(state: State, sym: int) -> State:
    """The state after ``sym`` (empty: ``sym`` is not allowed)."""
    out: set = set()
    for stack in state:
        _feed(stack, sym, out, 0)
    return frozenset(out)


def initial_state(root: Node) -> State:
    return frozenset({(root.frame(),)})


def accepts(root: Node, data: bytes) -> bool:
    """Whether ``root``'s grammar takes exactly ``data`` (bytes only, no special tokens): the
    plain walk, for one text checked once (the output parser asking whether the grammar's JSON
    branch took a GLM value), where building a ``Grammar``'s tables would not pay."""
    state = initial_state(root)
    for sym in data:
        state = advance(state, sym)
        if not state:
            return False
    return () in advance(state, END)


class Grammar:
    """A root node plus the lazily built automaton and the per-state caches."""

    def __init__(self, root: Node, *, max_states: int = 20_000) -> None:
        self.root = root
        self.max_states = max_states
        self.epoch = 0
        self.initial = initial_state(root)
        self._reset()

    def _reset(self) -> None:
        self.states: list[State] = []
        self.ids: dict[State, int] = {}
        self.transitions: list[dict[int, int]] = []
        self.accepts_end_cache: dict[int, bool] = {}
        # Filled by masks.py: per-state token masks and per-state self-loop byte sets.
        self.mask_cache: dict[int, object] = {}
        self.loop_cache: dict[int, int] = {}
        self.epoch += 1

    def maybe_reset(self) -> None:
        """Drop every cached state once the table is too big. Call only between steps (a
        reset voids every id handed out so far; holders re-intern their state by value)."""
        if len(self.states) >= self.max_states:
            self._reset()

    def intern(self, state: State) -> int:
        if not state:
            return DEAD
        sid = self.ids.get(state)
        if sid is None:
            sid = len(self.states)
            self.states.append(state)
            self.ids[state] = sid
            self.transitions.append({})
        return sid

    def next(self, sid: int, sym: int) -> int:
        """Memoised transition; ``DEAD`` when ``sym`` is not allowed."""
        if sid == DEAD:
            return DEAD
        row = self.transitions[sid]
        nxt = row.get(sym)
        if nxt is None:
            nxt = self.intern(advance(self.states[sid], sym))
            row[sym] = nxt
        return nxt

    def accepts_end(self, sid: int) -> bool:
        """May the output stop here (the grammar is complete)?"""
        if sid == DEAD:
            return False
        known = self.accepts_end_cache.get(sid)
        if known is None:
            known = () in advance(self.states[sid], END)
            self.accepts_end_cache[sid] = known
        return known

    def can_continue(self, sid: int) -> bool:
        """Could any more input be accepted here?"""
        return sid != DEAD and any(stack for stack in self.states[sid])
