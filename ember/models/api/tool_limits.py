"""How many tools one request may declare, and how many properties their schemas may hold.

Every tool's parameters are compiled into the request's grammar. With no bound, one request
of 500 tools x 400 required properties (review26) took 2.5 s to check on the server's event
loop and 16.3 s to build on the grammar thread, and kept 293 MiB. OpenAI bounds a request's
tools at 128, and a schema's object properties at 5,000; ember bounds the properties of all
the request's tools together by the same 5,000 (one grammar holds them all).

The count walks the schemas' JSON (no ``$ref`` is followed: a definition counts once), before
any schema is compiled, so a request past a bound costs one linear pass and a 400.
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import at

MAX_TOOLS = 128
MAX_TOOL_PROPERTIES = 5000
# Keywords whose value is a schema, or a list or map of schemas (where properties may hide).
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")


def count_properties(schema: object) -> int:
    """Object properties declared anywhere in ``schema`` (``properties`` entries)."""
    total = 0
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            total += len(properties)
        for key in _ONE:
            if key in node:
                pending.append(node[key])
        for key in _MANY:
            if isinstance(node.get(key), list):
                pending.extend(node[key])
        for key in _NAMED:
            if isinstance(node.get(key), Mapping):
                pending.extend(node[key].values())
    return total


def _parameters(tool: object) -> tuple[str, object] | None:
    """A raw tool's parameters and their path below the tool (None: not there, or malformed:
    the tool's own parser names that)."""
    if not isinstance(tool, Mapping):
        return None
    function = tool.get("function")
    if isinstance(function, Mapping):
        return "function/parameters", function.get("parameters")
    if "parameters" in tool:  # Workers AI's older flat shape
        return "parameters", tool["parameters"]
    return None


def check_tool_limits(tools: list, path: str) -> None:
    """Raise ``InvalidRequestField`` naming ``path`` (too many tools) or the parameters of the
    tool whose properties cross ``MAX_TOOL_PROPERTIES``."""
    if len(tools) > MAX_TOOLS:
        raise InvalidRequestField(path, f"at most {MAX_TOOLS} tools", f"{len(tools)} tools")
    total = 0
    for i, tool in enumerate(tools):
        found = _parameters(tool)
        if found is None:
            continue
        total += count_properties(found[1])
        if total > MAX_TOOL_PROPERTIES:
            raise InvalidRequestField(
                f"{at(path, i)}/{found[0]}",
                f"tools whose parameters declare at most {MAX_TOOL_PROPERTIES} properties in all",
                f"{total} properties so far",
            )
