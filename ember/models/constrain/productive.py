"""Which ``$ref`` targets some finite JSON value can match.

A reference cycle that every value must go around forever (``a -> b -> a``, or an object whose
required property is the object itself) matches nothing: the grammar compiled, and the first
step of decoding found no allowed token (a 500 "dead end", or an error event in a 200 stream;
review26). A schema without references always matches something (the compiler refuses
``false`` and empty enums), so only references can make a node match nothing, and refusing
every reference that matches nothing leaves no dead end anywhere in the grammar.

The classic grammar "productive symbols" fixpoint: start from "nothing is productive" and mark
nodes until nothing changes. Nodes the schema compiler makes from references downwards:
``Ref`` (its target), ``Choice`` (any alternative), ``JObject`` (every required value),
``JArray`` (no item needed, or the item); every other node is a leaf that matches something.
"""

from __future__ import annotations

from collections.abc import Iterable

from ember.models.constrain.json_nodes import JArray, JObject
from ember.models.constrain.nodes import Choice, Node, Ref


def _needs(node: Node) -> tuple[list[Node], bool] | None:
    """What ``node`` needs to match something: ``(children, all_of)`` (all of them, or any of
    them), or None for a leaf that always can."""
    if isinstance(node, Ref):
        assert node.target is not None, f"unbound reference {node.name}"
        return [node.target], True
    if isinstance(node, Choice):
        return [move[1][0] for move in node.moves], False
    if isinstance(node, JObject):
        return [v for v, r in zip(node.values, node.required, strict=True) if r], True
    if isinstance(node, JArray):
        return ([node.item] if node.min_items > 0 else []), True
    return None


def unproductive_refs(refs: Iterable[Ref]) -> list[Ref]:
    """The references (of ``refs``) that no finite value matches, in their given order."""
    refs = list(refs)
    rules: dict[int, tuple[Node, list[Node], bool]] = {}
    pending: list[Node] = list(refs)
    while pending:  # every rule node reachable from a reference without crossing a leaf
        node = pending.pop()
        if id(node) in rules:
            continue
        needs = _needs(node)
        if needs is None:
            continue
        rules[id(node)] = (node, *needs)
        pending.extend(needs[0])
    # Worklist, linear in the edges: a rule waits for ``missing`` more productive children
    # (all of its rule children, or any one of them).
    parents: dict[int, list[int]] = {key: [] for key in rules}
    missing: dict[int, int] = {}
    ready: list[int] = []
    for key, (_, children, all_of) in rules.items():
        inner = [id(c) for c in children if id(c) in rules]
        for child in inner:
            parents[child].append(key)
        if all_of:
            missing[key] = len(inner)
        else:
            missing[key] = 0 if len(inner) < len(children) else 1
        if missing[key] == 0:
            ready.append(key)
    productive: set[int] = set()
    while ready:
        key = ready.pop()
        if key in productive:
            continue
        productive.add(key)
        for parent in parents[key]:
            if parent not in productive:
                missing[parent] -= 1
                if missing[parent] == 0:
                    ready.append(parent)
    return [ref for ref in refs if id(ref) not in productive]
