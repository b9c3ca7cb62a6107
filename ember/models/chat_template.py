"""Chat templates rendered the way the real models render them: Jinja in a sandbox.

The environment matches the one HF transformers builds for ``apply_chat_template`` (immutable
sandbox, ``trim_blocks``/``lstrip_blocks``, ``loopcontrols``, a ``tojson`` that keeps non-ASCII
and takes ``indent``/``separators``/``sort_keys``, ``raise_exception``, ``strftime_now``,
``namespace`` without underscore attributes, ``{% generation %}`` blocks), so a template from a
real checkpoint renders here exactly as it does there; the tests hold the two to the same string.

Messages are normalised first the way OpenAI-compatible servers do before templating: objects
become plain dicts, ``None`` values are dropped, ``reasoning``/``thinking`` are aliased to
``reasoning_content``, and a tool call's JSON-string ``arguments`` become a dict (templates such as
GLM's iterate over them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ember.errors import CheckpointError, InvalidModelInput

REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
RESERVED_VARIABLES = frozenset({"messages", "tools", "documents", "add_generation_prompt"})


class _GenerationBlock(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (marks trainable text in HF): renders its body."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


class _Namespace(jinja2.utils.Namespace):
    """``namespace()`` that refuses underscore attributes (no reaching into CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - Jinja's own signature trick
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"namespace attribute {name!r} is not allowed")


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["namespace"] = _Namespace
    env.globals["dict"] = lambda *a, **k: dict(*a, **k)
    return env


def _plain(value: Any) -> Any:
    """Rebuild a value from plain JSON types so the sandbox sees nothing with methods of its own."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _normalize_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
        try:
            parsed = json.loads(fn["arguments"]) if fn["arguments"].strip() else {}
        except ValueError:
            parsed = None  # not JSON: leave the string for the template to print verbatim
        if isinstance(parsed, dict):
            call = {**call, "function": {**fn, "arguments": parsed}}
    return call


def normalize_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Plain dicts, ``None`` dropped, reasoning aliased, tool-call arguments parsed."""
    out = []
    for i, message in enumerate(messages):
        plain = _plain(message)
        if not isinstance(plain, dict):
            raise InvalidModelInput(
                f"messages[{i}]", f"messages[{i}] must be an object with a 'role'"
            )
        if not isinstance(plain.get("role"), str):
            raise InvalidModelInput(f"messages[{i}].role", f"messages[{i}].role must be a string")
        msg = {k: v for k, v in plain.items() if v is not None}
        reasoning = next((msg[k] for k in REASONING_FIELDS if msg.get(k) is not None), None)
        if reasoning is not None:
            msg = {"thinking": reasoning, **msg, "reasoning_content": reasoning}
        if isinstance(msg.get("tool_calls"), list):
            msg["tool_calls"] = [
                _normalize_tool_call(c) if isinstance(c, dict) else c for c in msg["tool_calls"]
            ]
        out.append(msg)
    return out


@dataclass(frozen=True)
class ChatTemplate:
    """A compiled chat template plus the special-token variables HF passes to it."""

    source: str
    special_tokens: Mapping[str, str] = field(default_factory=dict)
    origin: str = "<chat template>"

    def __post_init__(self) -> None:
        try:
            compiled = _environment().from_string(self.source)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            raise CheckpointError(
                f"{self.origin}: chat template does not parse (line {exc.lineno}: {exc.message})"
            ) from exc
        object.__setattr__(self, "_compiled", compiled)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = False,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text; ``kwargs`` (chat_template_kwargs) reach the template as variables."""
        kwargs = {**(chat_template_kwargs or {}), **kwargs}
        clash = RESERVED_VARIABLES & kwargs.keys()
        if clash:
            raise InvalidModelInput(
                "chat_template_kwargs",
                f"chat_template_kwargs may not set {sorted(clash)}: they are set by the request",
            )
        variables = {**self.special_tokens, **_plain(kwargs)}
        try:
            return self._compiled.render(  # type: ignore[attr-defined]
                messages=normalize_messages(messages),
                tools=_plain(list(tools)) if tools is not None else None,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **variables,
            )
        except jinja2.exceptions.TemplateError as exc:
            raise InvalidModelInput(
                "messages", f"the chat template rejected the messages: {exc}"
            ) from exc
