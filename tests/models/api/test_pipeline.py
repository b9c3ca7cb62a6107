# ruff: noqa: E501  (request bodies read best unwrapped)
"""The path a model server takes, end to end, with a stand-in for the model (random choices
among the allowed tokens): validate the request, build the grammar and the parser, stream the
output through ChatStream as Workers AI events, and check the message the client reassembles."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from ember.models.api.chat_request import parse_chat_request
from ember.models.api.constraints import constraint_for, output_parser_for
from ember.models.api.deltas import DeltaMessage, OutputAccumulator, ToolCallDelta
from ember.models.api.responses import ChatStream, Usage
from ember.models.api.sse import WorkersEvents, parse_sse
from ember.models.constrain.session import GrammarCache
from tests.models.constrain.fixtures import sample_tokens, small_vocab

VOCAB = small_vocab()
PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "units": {"enum": ["c", "f"]},
    },
    "required": ["city", "days"],
}


def _token_text(token: int) -> bytes:
    if token in VOCAB.eos_ids:
        return b""
    return VOCAB.tokens[token] or VOCAB.special[token].encode()


def _run(body: dict, tool_format: str, seed: int) -> tuple[list, object]:
    request = parse_chat_request(body, dialect="workers")
    reasoning = "inside" if request.enable_thinking else "off"
    spec = constraint_for(request, tool_format=tool_format, reasoning=reasoning)  # type: ignore[arg-type]
    assert spec is not None
    decoder = GrammarCache().decoder(spec, VOCAB)
    tokens = sample_tokens(decoder, random.Random(seed))
    parser = output_parser_for(
        request, tool_format=tool_format, reasoning=reasoning, id_factory=lambda: "call_1"
    )  # type: ignore[arg-type]
    stream, events = (
        ChatStream(id="chatcmpl-x", created=1, model="@cf/zai-org/glm-4.7-flash", parser=parser),
        WorkersEvents(),
    )
    wire = events.chunk(stream.start())
    pending = b""
    for token in tokens:  # detokenize incrementally, holding incomplete UTF-8, as an engine does
        pending += _token_text(token)
        try:
            text, pending = pending.decode("utf-8"), b""
        except UnicodeDecodeError:
            continue
        wire += b"".join(events.chunk(c) for c in stream.text(text))
    assert pending == b""
    wire += b"".join(events.chunk(c) for c in stream.finish("stop"))
    wire += events.end(Usage(prompt_tokens=10, completion_tokens=len(tokens)))
    return parse_sse(wire), stream.message()


def _reassemble(payloads: list) -> object:
    total = OutputAccumulator()
    for payload in payloads:
        if not isinstance(payload, dict) or "choices" not in payload:
            continue
        delta = payload["choices"][0]["delta"]
        total.add(
            DeltaMessage(
                reasoning=delta.get("reasoning_content", ""),
                content=delta.get("content", ""),
                tool_calls=[
                    ToolCallDelta(
                        t["index"],
                        t.get("id"),
                        t["function"].get("name"),
                        t["function"]["arguments"],
                    )
                    for t in delta.get("tool_calls", [])
                ],
            )
        )
    return total.result()


@pytest.mark.parametrize("tool_format", ["kimi", "glm47", "glm45"])
@pytest.mark.parametrize("seed", range(3))
def test_required_tool_call_streams_valid_arguments(tool_format: str, seed: int) -> None:
    body = {
        "messages": [{"role": "user", "content": "Weather in Paris for 3 days?"}],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "parameters": PARAMETERS}}
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stream": True,
    }
    payloads, message = _run(body, tool_format, seed)
    assert payloads[-1] == "[DONE]" and payloads[-2]["response"] == ""  # type: ignore[index]
    assert payloads[-3]["choices"][0]["finish_reason"] == "tool_calls"  # type: ignore[index]
    assert _reassemble(payloads) == message
    (call,) = message.tool_calls  # type: ignore[attr-defined]
    assert call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), PARAMETERS)
    assert message.reasoning is None or "</think>" not in message.reasoning  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(3))
def test_json_schema_streams_valid_json(seed: int) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "tags"],
    }
    body = {
        "prompt": "Tell me about India.",
        "response_format": {"type": "json_schema", "json_schema": schema},
        "chat_template_kwargs": {"enable_thinking": False},
        "stream": True,
    }
    payloads, message = _run(body, "glm47", seed)
    assert _reassemble(payloads) == message
    jsonschema.validate(json.loads(message.content), schema)  # type: ignore[attr-defined]
