"""GLM compiles each property's value on its own (raw text for strings, JSON otherwise), but the
automaton budget (automata.py) is the tool's, as on the JSON path that Kimi and request parsing
use: one ``Automata`` per tool's parameters, so a pattern that many properties repeat is built
once and the properties' patterns together are bounded (review33 #1: each property had a budget
of its own, and the raw branch none, so 5,000 properties took minutes of CPU per request)."""

from __future__ import annotations

import pytest

from ember.models.constrain.automata import AutomatonBudgetExceeded
from ember.models.constrain.nodes import Marker, Node
from ember.models.constrain.regex_avoid import Liveness, RawRegexText
from ember.models.constrain.regex_nodes import JRegexString
from ember.models.constrain.schema import compile_schema
from ember.models.constrain.tool_grammars import ToolSignature, check_glm_arguments, glm_tool_calls
from ember.models.constrain.tool_nodes import IndexedRepeat

PATH = "/tools/0/function/parameters"


def _distinct_patterns(kind: object, count: int = 130) -> dict:
    # About 5,100 units of work each: 130 of them pass the 600,000-unit budget, one never does.
    properties = {
        f"p{i}": {"type": kind, "pattern": f"^[0-9a-f]{{1000}}-{i}$"} for i in range(count)
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


@pytest.mark.parametrize("kind", ["string", ["string", "integer"]])
def test_glm_refuses_the_keyword_the_json_path_refuses(kind: object) -> None:
    parameters = _distinct_patterns(kind)
    with pytest.raises(AutomatonBudgetExceeded) as json_path:
        compile_schema(parameters, path=PATH, strict=False)
    with pytest.raises(AutomatonBudgetExceeded) as glm_path:
        check_glm_arguments(ToolSignature("f", parameters), PATH)
    assert glm_path.value.field == json_path.value.field
    assert glm_path.value.field.endswith("/pattern")


def _regexes(node: Node) -> list[object]:
    """The automata of every pattern node reachable from ``node``, and the raw nodes'
    liveness tables (as large as their automaton, built from it)."""
    found: list[object] = []
    seen: set[int] = set()
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        # Counted wherever reached: a node the grammar shares counts once per use.
        if isinstance(item, (RawRegexText, JRegexString)):
            found.append(item.regex)
        if isinstance(item, RawRegexText):
            found.append(item.liveness)
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, IndexedRepeat):
            stack.append(item._item(0))  # built on demand: each call's node
        if isinstance(item, Node):
            for slot in getattr(type(item), "__slots__", ()):
                stack.append(getattr(item, slot, None))
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


@pytest.mark.parametrize("kind", ["string", ["string", "integer"]])
def test_a_pattern_many_properties_repeat_is_built_once(kind: object) -> None:
    # Raw branches and JSON branches alike: one automaton for the tool, however many values.
    pattern = "^(ab|cd){1,40}$"
    properties = {f"p{i}": {"type": kind, "pattern": pattern} for i in range(5)}
    tool = ToolSignature("f", {"type": "object", "properties": properties})
    grammar = glm_tool_calls([tool], Marker({}), parallel=False, dialect="glm47")
    built = _regexes(grammar)
    assert len(built) >= 5
    assert len({id(r) for r in built if not isinstance(r, Liveness)}) == 1
    assert len({id(r) for r in built if isinstance(r, Liveness)}) == 1
