"""The bytes a built grammar holds: every object reachable from it, each counted once.

The model server keeps built grammars for later requests; a count of grammars bounded nothing
(one grammar of 500 tools held 293 MiB, another a few KiB). This walks the grammar's objects
(nodes, their tables, the automaton and mask caches built so far) with ``gc.get_referents``
and sums ``sys.getsizeof``: what dropping the grammar would free, give or take the few small
objects it shares with others (small ints, interned bytes), which it counts as its own.
Linear in the objects walked; run where the grammar was built, off the event loop.
"""

from __future__ import annotations

import gc
import sys
import types

# Objects that belong to the program, not to one grammar: never walked into.
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)


def grammar_bytes(grammar: object) -> int:
    """``sys.getsizeof`` summed over every object reachable from ``grammar``, once each."""
    seen: set[int] = set()
    total = 0
    pending = [grammar]
    while pending:
        obj = pending.pop()
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        pending.extend(gc.get_referents(obj))
    return total
