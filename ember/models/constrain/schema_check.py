"""Whether a request's JSON schema compiles, compiled once per distinct schema.

Request parsing refuses a schema the grammar compiler cannot take, naming the keyword, by
compiling it (``compile_schema``) on the event loop that parses the request: pure Python, 16-85
ms for schemas near the bounds, while no other stream on that loop is written (the model
server's, and the supervisor's for ``env.AI.run``). Structured-output clients send the same
schema with every request, so a schema that compiled is remembered, by the SHA-256 of its JSON
text and ``strict`` (at most ``KNOWN`` of them, the least recently seen forgotten first), and
not compiled again. An invalid schema is compiled every time it comes: its error names the field
where this request has it. The model server parses a large request (a large schema) on a worker
thread (``prompt_intake.taken_in``): the compiler holds the GIL while it runs, but the loop gets
its turns and keeps writing other streams, where on the loop nothing moved (review26).

Every schema of one request draws on one automaton budget (``budget``, automata.py): a schema
is compiled with what the request has left, and charges the states it built; a known schema
charges the states it built when it compiled, so a request is refused alike whether its
schemas are known or not. Charging each schema's own states (no regex shared across schemas)
bounds what the grammar, which shares them, builds from the same schemas.

    check_schema(schema, path="/response_format/json_schema/schema", strict=True)
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable

from ember.models.constrain.automata import Automata
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.schema_depth import check_depth

KNOWN = 1024


class KnownSchemas:
    """Digests of schemas that compiled, least recently seen first, and the automaton states
    each charges. One per process (and per kind of compile): the memo of a pure function
    (whether a schema text compiles), so sharing it changes no answer, only how soon it comes."""

    def __init__(self, size: int = KNOWN) -> None:
        self.size = size
        self._seen: OrderedDict[bytes, int] = OrderedDict()  # digest -> automaton states
        # A large request is parsed on a worker thread (prompt_intake.taken_in), a small one
        # on the event loop: the memo is shared by both.
        self._lock = threading.Lock()

    def known(
        self, key: bytes | None, *, path: str, budget: Automata, build: Callable[[Automata], int]
    ) -> None:
        """Charge ``budget`` (naming ``path``) what the compile of ``key`` charged, compiling it
        (``build``, given a cache of its own that counts from ``budget``'s and returning the
        states to charge) only when not known; what it built is kept in ``budget`` for the
        request's later compiles (``Automata.adopt``). Raises what ``build`` raises."""
        if key is not None:
            if key in budget.charged:
                return  # the same schema, charged once already
            with self._lock:
                known = self._seen.get(key)
                if known is not None:
                    self._seen.move_to_end(key)
            if known is not None:
                budget.charge(known, path)
                budget.charged.add(key)
                return
        own = budget.apart()
        built = build(own)
        budget.charge(built, path)
        budget.adopt(own)
        if key is not None:
            budget.charged.add(key)
            with self._lock:
                self._seen[key] = built
                if len(self._seen) > self.size:
                    self._seen.popitem(last=False)

    def check(
        self, schema: object, *, path: str, strict: bool, budget: Automata | None = None
    ) -> None:
        """Raise ``InvalidRequestField`` (naming ``path``'s keyword) unless ``schema``
        compiles within what ``budget`` (the request's, None: a budget of its own) has left;
        a schema already known to compile is not compiled again, only charged."""
        budget = Automata() if budget is None else budget
        check_depth(schema, path)  # before schema_key's json.dumps, which recurses per level

        def build(own: Automata) -> int:
            # A cache of its own: a schema's states are its own, whatever else the request
            # carries, so a known schema charges what it would compiled.
            compile_schema(schema, path=path, strict=strict, automata=own)
            return own.states - budget.states

        self.known(schema_key(schema, strict), path=path, budget=budget, build=build)


def schema_key(schema: object, strict: bool, kind: bytes = b"") -> bytes | None:
    """The schema's identity: its JSON text's digest (None for one with no JSON text);
    ``kind``: which compile (GLM's arguments, tool_grammars) when not the JSON path's."""
    try:
        text = json.dumps(schema, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode() + (b"\x01" if strict else b"\x00") + kind).digest()


KNOWN_SCHEMAS = KnownSchemas()
# GLM's check of a tool's arguments (tool_grammars.check_glm_arguments): its own memo, since
# it charges only the states the JSON path's compile of the same schema did not (review35).
KNOWN_GLM_ARGUMENTS = KnownSchemas()


def check_schema(
    schema: object, *, path: str, strict: bool = True, budget: Automata | None = None
) -> None:
    """``KNOWN_SCHEMAS.check``: raise unless ``schema`` compiles within ``budget`` (the
    request's automaton budget), compiling each schema that compiles only once."""
    KNOWN_SCHEMAS.check(schema, path=path, strict=strict, budget=budget)
