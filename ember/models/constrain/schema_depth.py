"""How deep a schema may nest, checked before anything walks it.

The schema compiler refuses a subschema nested past ``MAX_DEPTH``, but only when it reaches
it, and other walks come first and recurse per level of the whole JSON value, values inside
it included: ``schema_key``'s ``json.dumps`` (the known-schemas memo), ``value_key``'s of an
``enum`` or ``const`` value. A body parsed from JSON is held to ``MAX_BODY_DEPTH``
(``fields.check_body``), but a schema built in Python (the gateway's API) reaches the same
walks at any depth: at ~3,000 levels a RecursionError, a 503 "internal error; please try
again" for a schema that can never compile (review42). ``check_depth`` applies the compiler's
one bound to every object and array in the schema, without recursion, at each entry that takes
a schema (``compile_schema``, ``check_schema``, GLM's ``check_glm_arguments``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.constrain.schema_keywords import pointer_part

# Levels of nesting (JSON pointer steps below the schema: ``properties/a`` is two) a schema may
# have. The compiler and the grammar it builds recurse per level; past a few hundred levels
# Python's stack runs out (a 500 for what is a bad schema). OpenAI allows 10 levels.
MAX_DEPTH = 128

# (a step's parent trail, the step): a pointer built only for the error, not for every value.
Trail = tuple["Trail", str | int] | None


def check_depth(schema: object, path: str) -> None:
    """Raise ``InvalidRequestField`` naming the first object or array of ``schema`` (at
    ``path``) more than ``MAX_DEPTH`` pointer steps below it."""
    stack: list[tuple[object, int, Trail]] = [(schema, 0, None)]
    # A schema built in Python may share a part, or hold itself. A part is walked again only
    # when met deeper than before (where its own depth may pass the bound): at most MAX_DEPTH
    # times, not once a path (2**60 paths through 60 levels of pairs), and a part holding
    # itself is met deeper each time until refused.
    deepest: dict[int, int] = {}
    while stack:
        value, depth, trail = stack.pop()
        if not isinstance(value, Mapping | list | tuple):
            continue
        if depth > MAX_DEPTH:
            expected = f"a schema nested at most {MAX_DEPTH} levels deep"
            raise InvalidRequestField(_pointer(path, trail), expected, "a deeper one")
        # Before its items are listed: a shared wide part met again no deeper costs a lookup,
        # not a copy of its items (review43: 6,000 x 6,000 took 2.55 s).
        if deepest.get(id(value), -1) >= depth:
            continue
        deepest[id(value)] = depth
        items: list[tuple[str | int, object]]
        items = list(value.items()) if isinstance(value, Mapping) else list(enumerate(value))
        stack.extend((item, depth + 1, (trail, key)) for key, item in reversed(items))


def _pointer(path: str, trail: Trail) -> str:
    steps: list[str] = []
    while trail is not None:
        trail, key = trail
        steps.append(pointer_part(key))
    return path + "".join(f"/{step}" for step in reversed(steps))
