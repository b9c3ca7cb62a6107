"""Hostile request bodies for the model server, made by mutating valid ones (hypothesis).

A ``Hostile`` is what goes on the wire: a path, raw body bytes and a content type. Most are a
valid body of the endpoint with one to three fields replaced (by a value of the wrong type, a
number at or past a limit, NaN, an empty or huge string, a lone surrogate, deep nesting, an odd
schema or regex) or removed; the rest are not JSON objects at all, or are sent with the wrong
content type. Values JSON cannot spell in Python (a lone surrogate must stay an escape, nesting
deeper than ``json.dumps`` recurses) travel as ``Raw`` text spliced into the serialized body.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

CHAT, COMPLETIONS, GENERATE = "/v1/chat/completions", "/v1/completions", "/generate"
CONTEXT = 4096  # the tiny checkpoints' max_position_embeddings
JSON_TYPE = "application/json"


@dataclass(frozen=True)
class Raw:
    """JSON text to put in the body as is."""

    text: str


@dataclass(frozen=True)
class Hostile:
    path: str
    body: bytes
    content_type: str | None
    stream: bool
    mutated: tuple[str, ...]  # the dotted fields changed ("" for a body-level change)

    def describe(self) -> str:
        return f"POST {self.path} ({self.content_type}) {self.body[:600]!r}"


def base_body(path: str, model: str) -> dict[str, Any]:
    """A valid, cheap request for ``path``."""
    if path == CHAT:
        return {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
    if path == COMPLETIONS:
        return {"model": model, "prompt": "def f(", "max_tokens": 3}
    return {"text": "def f(", "sampling_params": {"max_new_tokens": 3}}


SAMPLING = [
    "temperature", "top_p", "top_k", "min_p", "seed", "n", "stop", "logit_bias",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens", "ignore_eos",
    "skip_special_tokens", "stop_token_ids", "regex", "response_format", "logprobs",
    "top_logprobs", "prompt_logprobs", "stream_options", "user", "best_of", "echo", "suffix",
    "unknown_field_zz",
]  # fmt: skip
FIELDS: dict[str, list[str]] = {
    CHAT: [
        "model", "messages", "max_tokens", "max_completion_tokens", "tools", "tool_choice",
        "parallel_tool_calls", "chat_template_kwargs", "structured_outputs",
        "messages.0", "messages.0.role", "messages.0.content", "messages.0.name",
        "messages.0.tool_calls", "messages.0.content.0", "messages.1",
        "response_format.json_schema", "response_format.json_schema.schema",
        "response_format.type", "tools.0.function.parameters", "tools.0.function.name",
        *SAMPLING,
    ],
    COMPLETIONS: ["model", "prompt", "max_tokens", "prompt.0", "structured_outputs", *SAMPLING],
    GENERATE: [
        "text", "input_ids", "rid", "stream", "return_logprob", "top_logprobs_num",
        "logprob_start_len", "return_text_in_logprobs", "sampling_params",
        *(f"sampling_params.{name}" for name in [
            "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
            "json_schema", "regex", "n", "ignore_eos", "skip_special_tokens", "no_stop_trim",
            "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
            "sampling_seed", "logit_bias", "unknown_field_zz",
        ]),
        "unknown_field_zz",
    ],
}  # fmt: skip

INT64 = 2**63
NUMBERS = [
    0, 1, -1, 2, 20, 255, 2**31, -(2**31), 2**53 + 1, INT64 - 1, INT64, -INT64, -INT64 - 1,
    2**64, 10**30, CONTEXT - 8, CONTEXT - 1, CONTEXT, CONTEXT + 1, 8191, 8192,
    math.nan, math.inf, -math.inf, -0.0, 0.5, 1e-320, 1e308, -1e308, 2.5, 100.0,
]  # fmt: skip


def _nested_schema(depth: int) -> str:
    """An object schema ``depth`` levels deep (parses, but recursive walkers may not cope)."""
    head = '{"type": "object", "required": ["a"], "properties": {"a": '
    return head * depth + '{"type": "integer"}' + "}}" * depth


# The numbers every knob is tried with, not left to chance (test_fuzz_requests, test_rest_fuzz).
EXTREMES = [1e308, -1e308, 2**63, 2**63 - 1, -(2**63) - 1, 2**64, math.nan, math.inf, 1e-320]
STRINGS = [
    "", " ", "x", "a" * 300, "ab " * 7000, Raw('"\\ud800"'), Raw('"a\\udfffb"'), "\x00", "\u2028",
    "🔥" * 50, "<|endoftext|>", "[gMASK]<sop>", "<think>", "(", "[a-", "a{99999}", ".*", r"\d+",
    "(a|b)*c", "[^\\x00-\\x{10FFFF}]", "user", "system", "tool", "assistant", "function",
    "json_object", "json_schema", "text", "auto", "none", "required", "celsius",
    '{"a": ' * 1000 + "1" + "}" * 1000, '{"type": "string"}', "{not json",  # JSON as text
]  # fmt: skip
SCHEMAS = [
    {}, True, False, {"type": "object"}, {"type": "string", "pattern": "("},
    {"type": "string", "minLength": 10**9}, {"type": "array", "minItems": 10**6},
    {"type": "integer", "minimum": 5, "maximum": 1}, {"enum": []}, {"not": {}},
    {"$ref": "#/nope"}, {"$ref": "#"}, {"type": "object", "required": ["a"], "properties": {}},
    {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}, "required": ["a"]},
    {"type": ["string", "null"], "format": "date-time"}, {"type": "nonsense"},
    {"anyOf": []}, {"allOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "string", "maxLength": 0}, {"const": {"a": [1, None]}},
    {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {}}},
    *(Raw(_nested_schema(depth)) for depth in (60, 300, 900)),
    Raw('{"type": "array", "items": ' * 800 + "{}" + "}" * 800),
]  # fmt: skip
ODD = [
    None, True, False, [], [None], [1, 2, 3], ["a"] * 5, [["x"]], [""], ["a"] * 300, {}, {"a": 1},
    {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"name": "x"}},
    {"type": "json_object"}, {"type": "text"}, {"type": "regex", "pattern": "("},
    {"role": "user", "content": "x"}, {"role": "user"}, {"role": "tool", "content": "x"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    {"role": "user", "content": [{"type": "text"}]}, {"type": "text", "text": 5},
    {"type": "function", "function": {"name": "", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "f"}}, {"type": "function"},
    {"include_usage": "yes"}, {"include_usage": True, "continuous_usage_stats": True},
    {"enable_thinking": "maybe"}, {"regex": "("}, {"json": {"type": "string"}},
    {str(2**40): 5}, {"-1": 1}, {"1": math.nan}, {"1": 1e308}, {"x": 1}, {"5": -100, "6": 100},
    [2**40], [-1], [0, 8191, 8192], list(range(CONTEXT + 2)), Raw("[" * 3000 + "]" * 3000),
    Raw('{"a":' * 3000 + "1" + "}" * 3000), Raw("[" * 900 + "]" * 900), Raw("NaN"),
    Raw("-Infinity"), Raw("1e999"),
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(NUMBERS),
    st.integers(-3, 40),
    st.sampled_from(STRINGS),
    st.sampled_from(SCHEMAS),
    st.sampled_from(ODD),
    st.text(max_size=20),
)

NOT_OBJECTS = [
    b"", b"   ", b"{not json", b"null", b"[]", b"[1, 2]", b"1", b'"text"', b"\xff\xfe{", b"{}",
    b'{"a": 1,}', b"{" * 4000 + b"}" * 4000, b"[" * 100000 + b"]" * 100000,
    b'{"text": "x"} trailing', b'{"messages": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
    b'{"model": "\xc3\x28"}', b"\x00", b'{"text": "\\ud800\\ud800", "prompt": "\\udc00"}',
]  # fmt: skip
CONTENT_TYPES = [
    None, "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1",
    "APPLICATION/JSON", "application/vnd.api+json", "multipart/form-data; boundary=x", "",
]  # fmt: skip


def dumps(value: Any) -> str:
    """``value`` as JSON text, ``Raw`` parts spliced in as they are; NaN and infinities come
    out as Python's json spells them (``NaN``, ``Infinity``: a lax parser takes them)."""
    raws: list[str] = []

    def swap(item: Any) -> Any:
        if isinstance(item, Raw):
            raws.append(item.text)
            return f"\x01raw{len(raws) - 1}\x01"
        if isinstance(item, dict):
            return {key: swap(v) for key, v in item.items()}
        if isinstance(item, list):
            return [swap(v) for v in item]
        return item

    text = json.dumps(swap(value))
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x01raw{index}\x01"), raw, 1)
    return text


def _set(body: dict[str, Any], dotted: str, value: Any, *, remove: bool) -> None:
    """Replace (or remove) the field at ``dotted``, making the containers on the way."""
    keys = dotted.split(".")
    node: Any = body
    for key in keys[:-1]:
        if isinstance(node, list):
            index = int(key) if key.isdigit() else 0
            while len(node) <= index:
                node.append({})
            if not isinstance(node[index], (dict, list)):
                node[index] = {}
            node = node[index]
        else:
            child = node.get(key)
            if not isinstance(child, (dict, list)):
                child = node[key] = {}
            node = child
    last = keys[-1]
    if isinstance(node, list):
        index = int(last) if last.isdigit() else 0
        if remove:
            if index < len(node):
                node.pop(index)
            return
        while len(node) <= index:
            node.append(None)
        node[index] = value
    elif remove:
        node.pop(last, None)
    else:
        node[last] = value


@st.composite
def hostile_requests(draw: st.DrawFn, path: str, model: str) -> Hostile:
    stream = draw(st.booleans())
    if draw(st.integers(0, 9)) == 0:  # a body that is not a JSON object, or a wrong type
        if draw(st.booleans()):
            body = draw(st.sampled_from(NOT_OBJECTS))
            return Hostile(path, body, JSON_TYPE, stream, ("",))
        body = json.dumps(_streamed(base_body(path, model), path, stream)).encode()
        return Hostile(path, body, draw(st.sampled_from(CONTENT_TYPES)), stream, ("",))
    body = _streamed(base_body(path, model), path, stream)
    mutated = []
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(FIELDS[path]))
        _set(body, field, draw(VALUES), remove=draw(st.integers(0, 5)) == 0)
        mutated.append(field)
    return Hostile(path, dumps(body).encode("utf-8"), JSON_TYPE, stream, tuple(mutated))


def _streamed(body: dict[str, Any], path: str, stream: bool) -> dict[str, Any]:
    if stream:
        body["stream"] = True
    return body
