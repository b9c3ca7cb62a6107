"""``tools``, ``tool_choice`` and ``response_format``: validated, with schemas compiled up front
so that a schema ember cannot enforce is refused when the request arrives, naming the keyword."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ember.models.api.errors import InvalidRequestField
from ember.models.api.fields import (
    at,
    describe,
    optional_bool,
    optional_str,
    require_object,
    wrong_type,
)
from ember.models.api.tool_limits import check_tool_limits
from ember.models.constrain.automata import Automata
from ember.models.constrain.schema_check import check_schema
from ember.models.constrain.tool_grammars import ToolSignature

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SCHEMA_KEYS = ("type", "properties", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "items")


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    strict: bool = False

    def signature(self) -> ToolSignature:
        return ToolSignature(self.name, self.parameters, self.strict)

    def to_template(self) -> dict:
        """The tool as chat templates receive it (OpenAI's shape)."""
        function: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            function["description"] = self.description
        function["parameters"] = self.parameters or {"type": "object", "properties": {}}
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolChoice:
    """``mode``: none, auto, required (``allowed`` limits which tools; a named function is
    ``required`` with one allowed name and ``named``: its call finishes with ``stop``, not
    ``tool_calls``, as OpenAI and vLLM answer)."""

    mode: Literal["none", "auto", "required"]
    allowed: tuple[str, ...] | None = None
    named: bool = False  # tool_choice {"type": "function", ...}, not allowed_tools

    @property
    def forced_name(self) -> str | None:
        return (
            self.allowed[0]
            if self.allowed and len(self.allowed) == 1 and self.mode == "required"
            else None
        )


@dataclass(frozen=True)
class ResponseFormat:
    type: Literal["text", "json_object", "json_schema"] = "text"
    schema: Mapping[str, Any] | bool | None = None
    name: str | None = None
    # False only for OpenAI's explicit ``strict: false`` (the schema is a hint): keywords ember
    # cannot enforce are then ignored, as for tool parameters, where OpenAI accepts them.
    # Absent stays strict, ember's promise of a 400 over a silent miss (vLLM's guided_json and
    # Workers AI's shape have no such flag; the openai SDK's .parse() sends strict: true).
    strict: bool = True

    @property
    def wants_json(self) -> bool:
        return self.type != "text"


def _function(raw: Mapping, path: str, budget: Automata) -> FunctionTool:
    name = raw.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.match(name):
        raise InvalidRequestField(
            at(path, "name"), "a function name of 1-64 letters, digits, '_' or '-'", describe(name)
        )
    description = optional_str(raw, "description", path)
    strict = optional_bool(raw, "strict", path, False)
    parameters = raw.get("parameters")
    if parameters is not None:
        require_object(parameters, at(path, "parameters"))
        # A tool's schema is a hint unless the tool is strict: then, as OpenAI, a keyword
        # ember cannot enforce is refused, naming it, instead of being silently dropped.
        check_schema(parameters, path=at(path, "parameters"), strict=strict, budget=budget)
    return FunctionTool(name, description, parameters, strict)


def parse_tools(
    value: object, path: str, budget: Automata | None = None
) -> tuple[FunctionTool, ...]:
    """``budget``: the request's automaton budget, which every tool's schema draws on."""
    budget = Automata() if budget is None else budget
    if value is None:
        return ()
    if not isinstance(value, list):
        raise wrong_type(path, "an array of tools", value)
    check_tool_limits(value, path)  # before any schema is compiled
    tools: list[FunctionTool] = []
    for i, raw in enumerate(value):
        where = at(path, i)
        tool = require_object(raw, where)
        kind = tool.get("type")
        if kind == "function":
            tools.append(
                _function(
                    require_object(tool.get("function"), at(where, "function")),
                    at(where, "function"),
                    budget,
                )
            )
        elif kind is None and "name" in tool:  # Workers AI's older flat shape
            tools.append(_function(tool, where, budget))
        elif kind == "custom":
            raise InvalidRequestField(
                at(where, "type"),
                "'function' (custom tools with free-form or grammar input are not supported)",
                "'custom'",
                "unsupported_value",
            )
        else:
            raise InvalidRequestField(at(where, "type"), "'function'", describe(kind))
    names = [t.name for t in tools]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InvalidRequestField(
                at(at(at(path, i), "function"), "name"), "a name no other tool has", repr(name)
            )
    return tuple(tools)


def _named(raw: Mapping, path: str, names: list[str]) -> str:
    function = require_object(raw.get("function"), at(path, "function"))
    name = function.get("name")
    if name not in names:
        expected = "the name of a declared tool" + (
            f" ({', '.join(names)})" if names else " (no tools declared)"
        )
        raise InvalidRequestField(at(at(path, "function"), "name"), expected, describe(name))
    return name


def parse_tool_choice(value: object, path: str, tools: tuple[FunctionTool, ...]) -> ToolChoice:
    names = [t.name for t in tools]
    if value is None:
        return ToolChoice("auto" if tools else "none")
    if value in ("none", "auto", "required"):
        if value == "required" and not tools:
            raise InvalidRequestField(
                path, "'none' or 'auto' when no tools are declared", "'required'"
            )
        return ToolChoice(value)
    if isinstance(value, str):
        raise InvalidRequestField(
            path, "'none', 'auto', 'required' or a named function", describe(value)
        )
    choice = require_object(value, path)
    kind = choice.get("type")
    if kind == "function":
        return ToolChoice("required", (_named(choice, path, names),), named=True)
    if kind == "allowed_tools":
        allowed = require_object(choice.get("allowed_tools"), at(path, "allowed_tools"))
        where = at(path, "allowed_tools")
        mode = allowed.get("mode")
        if mode not in ("auto", "required"):
            raise InvalidRequestField(at(where, "mode"), "'auto' or 'required'", describe(mode))
        listed = allowed.get("tools")
        if not isinstance(listed, list) or not listed:
            raise wrong_type(at(where, "tools"), "a non-empty array of tools", listed)
        picked = tuple(
            _named(require_object(t, at(at(where, "tools"), i)), at(at(where, "tools"), i), names)
            for i, t in enumerate(listed)
        )
        return ToolChoice(mode, picked)
    if kind == "custom":
        raise InvalidRequestField(
            at(path, "type"),
            "'function' (custom tools are not supported)",
            "'custom'",
            "unsupported_value",
        )
    raise InvalidRequestField(at(path, "type"), "'function' or 'allowed_tools'", describe(kind))


def parse_response_format(
    value: object, path: str, budget: Automata | None = None
) -> ResponseFormat:
    if value is None:
        return ResponseFormat()
    body = require_object(value, path)
    kind = body.get("type")
    if kind == "text":
        return ResponseFormat()
    if kind == "json_object":
        return ResponseFormat("json_object")
    if kind != "json_schema":
        raise InvalidRequestField(
            at(path, "type"), "'text', 'json_object' or 'json_schema'", describe(kind)
        )
    where = at(path, "json_schema")
    spec = require_object(body.get("json_schema"), where)
    if "schema" in spec:  # OpenAI: {name, description?, schema, strict?}
        schema, schema_path = spec["schema"], at(where, "schema")
        name, strict = (
            optional_str(spec, "name", where),
            optional_bool(spec, "strict", where, True),
        )
    elif any(k in spec for k in _SCHEMA_KEYS):  # Workers AI's docs put the schema itself here
        schema, schema_path, name, strict = spec, where, None, True
    else:  # a name and no schema: any JSON object
        return ResponseFormat("json_object", name=optional_str(spec, "name", where))
    if not isinstance(schema, Mapping | bool):
        raise wrong_type(schema_path, "a JSON schema object", schema)
    check_schema(schema, path=schema_path, strict=strict, budget=budget)
    return ResponseFormat("json_schema", schema, name, strict)
