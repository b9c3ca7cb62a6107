"""A pattern that is only an alternation of literal strings (a choice list's regex,
``guided_fields.choice_regex``; ``yes|no|maybe`` written by hand) built as the trie of its
strings: one state a trie node, one edge a node's child.

Thompson's construction (regex_nfa.py) gives such a pattern two states a character and a
start closure holding every alternative: 5,000 choices of 30 characters were 320,000 states
and 665,000 units of work, past a request's budget, and each step of the matcher tested every
alternative still alive (review43 MEDIUM-2). The trie shares common prefixes and makes the
automaton deterministic wherever the strings' characters are single code points; its work is
linear in the characters: the pattern's (charged before it is read, as for any pattern) and one
unit a trie node (a node made, its edge kept: ~1 µs, as a unit costs elsewhere).

Any other pattern (a repeat, an alternation inside a concatenation, a search, length bounds)
takes the general construction; so does one with an empty class, whose "matches no string"
refusal is the general path's. The general construction is the reference the tests compare
this one with (tests/models/constrain/test_regex_literals.py).
"""

from __future__ import annotations

from ember.models.constrain.charset import ANY as ALL_CHARS
from ember.models.constrain.charset import CharSet
from ember.models.constrain.regex_syntax import Alt, Chars, Concat, Regex
from ember.models.constrain.regex_work import CHECK_EVERY, WorkCounter

StateSet = frozenset
Edges = tuple[tuple[CharSet, StateSet], ...]


def literal_strings(bodies: list[Regex]) -> list[tuple[CharSet, ...]] | None:
    """The strings (as sequences of character sets) that ``bodies``, the pattern's top-level
    alternatives with their anchors taken off, stand for; None unless each is a literal or an
    alternation of them (nested groups included)."""
    out: list[tuple[CharSet, ...]] = []
    for body in bodies:
        if not _strings(body, out):
            return None
    return out


def _strings(tree: Regex, out: list[tuple[CharSet, ...]]) -> bool:
    sequence = _sequence(tree)
    if sequence is not None:
        out.append(sequence)
        return True
    if isinstance(tree, Alt):
        return all(_strings(item, out) for item in tree.items)
    if isinstance(tree, Concat) and len(tree.items) == 1:  # a group, or an anchored body
        return _strings(tree.items[0], out)
    return False


def _sequence(tree: Regex) -> tuple[CharSet, ...] | None:
    """``tree`` as one string of character sets, or None (an empty set among them too)."""
    if isinstance(tree, Chars):
        return (tree.chars,) if tree.chars else None
    if not isinstance(tree, Concat):
        return None
    parts: list[CharSet] = []
    for item in tree.items:
        part = _sequence(item)
        if part is None:
            return None
        parts.extend(part)
    return tuple(parts)


def trie_automaton(
    strings: list[tuple[CharSet, ...]], work: WorkCounter
) -> tuple[StateSet, int, list[Edges]]:
    """``(start, final, edges)`` of the trie of ``strings``, in ``RegexAutomaton``'s form: a
    target is the set of the node itself (when it goes on) and the final state (when a string
    ends there). Every node leads to a string's end, so none is cut as dead. Charges ``work``
    one unit a node made: ``AutomatonWorkExceeded`` as soon as it passes the budget."""
    # Sorted, each string shares its prefix with the one before: its nodes are the previous
    # path up to where they part, then new ones. No dict a node (a dict, a list and a set a
    # node made the cyclic GC most of the build's time): children as first-child and
    # next-sibling links, plain ints. Charged in chunks of ``CHECK_EVERY`` units.
    keyed = sorted((tuple(c.ranges for c in string), string) for string in strings)
    sets: list[CharSet] = [ALL_CHARS]  # the set on the edge into each node (the root's: unused)
    first: list[int] = [-1]  # each node's first child (-1: none)
    sibling: list[int] = [-1]  # the next child of the node's parent
    last: list[int] = [-1]  # each node's last child, where the next one is linked
    ends = [False]
    path = [0]  # the previous string's nodes, the root first
    previous: tuple = ()
    made = 0
    for key, string in keyed:
        shared = 0
        while shared < len(previous) and shared < len(key) and previous[shared] == key[shared]:
            shared += 1
        del path[shared + 1 :]
        for chars in string[shared:]:
            parent, node = path[-1], len(sets)
            sets.append(chars)
            first.append(-1)
            sibling.append(-1)
            last.append(-1)
            ends.append(False)
            if last[parent] < 0:
                first[parent] = node
            else:
                sibling[last[parent]] = node
            last[parent] = node
            path.append(node)
            made += 1
            if made == CHECK_EVERY:
                work.add(made)
                made = 0
        ends[path[-1]] = True
        previous = key
    work.add(made)
    final = len(sets)
    alone = frozenset((final,))  # the target of every leaf: one set, shared

    def target(node: int) -> StateSet:
        if first[node] < 0:
            return alone
        return frozenset((node, final)) if ends[node] else frozenset((node,))

    edges: list[Edges] = []
    for node in range(final):
        row: list[tuple[CharSet, StateSet]] = []
        leaves: list[tuple[int, int]] = []  # the ranges of the children that end a string
        child = first[node]
        while child >= 0:
            if first[child] < 0:
                leaves.extend(sets[child].ranges)
            else:
                row.append((sets[child], target(child)))
            child = sibling[child]
        if leaves:
            # One edge to the final state for all of them: a step tests each edge of a state,
            # and 50,000 one-character choices were 50,000 edges at the root (28 ms a step,
            # review44).
            row.append((CharSet(leaves), alone))
        edges.append(tuple(row))
    edges.append(())  # the final state's
    return target(0), final, edges
