# ruff: noqa: E501  (exact wire bytes read best unwrapped)
"""Response objects and SSE streams, byte for byte, for the OpenAI endpoints and the Workers
AI binding; Workers AI error codes with the platform's messages."""

from __future__ import annotations

import json

import pytest

from ember.models.api import errors
from ember.models.api.deltas import ParsedOutput, ToolCall
from ember.models.api.generate_response import generate_finish_reason, generate_response
from ember.models.api.output_parser import ChatOutputParser
from ember.models.api.responses import (
    ChatStream,
    TokenLogprob,
    Usage,
    chat_choice,
    chat_completion,
    completion_logprobs,
    text_completion,
)
from ember.models.api.sse import OpenAIEvents, WorkersEvents, parse_sse, sse_data

USAGE = Usage(prompt_tokens=12, completion_tokens=5, cached_tokens=8)


def test_chat_completion_object() -> None:
    output = ParsedOutput(None, "think", (ToolCall("call_a", "f", '{"x":1}'),))
    body = chat_completion(
        id="chatcmpl-1",
        created=1700000000,
        model="@cf/zai-org/glm-4.7-flash",
        output=output,
        finish_reason="stop",
        usage=USAGE,
    )
    assert body == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "@cf/zai-org/glm-4.7-flash",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "reasoning_content": "think",
                    "reasoning": "think",
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"x":1}'},
                        }
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
                "stop_reason": None,
                "matched_stop": None,
            }
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 5,
            "total_tokens": 17,
            "prompt_tokens_details": {"cached_tokens": 8},
        },
        "system_fingerprint": None,
    }
    assert isinstance(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], str)


def test_length_stays_length_and_logprobs_are_listed() -> None:
    logprobs = [TokenLogprob("Hi", -0.1, (TokenLogprob("Hi", -0.1), TokenLogprob("Yo", -2.5)))]
    body = chat_completion(
        id="c",
        created=1,
        model="m",
        output=ParsedOutput("Hi", None, ()),
        finish_reason="length",
        usage=Usage(1, 1, reasoning_tokens=0),
        logprobs=logprobs,
    )
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["logprobs"] == {
        "content": [
            {
                "token": "Hi",
                "logprob": -0.1,
                "bytes": [72, 105],
                "top_logprobs": [
                    {"token": "Hi", "logprob": -0.1, "bytes": [72, 105]},
                    {"token": "Yo", "logprob": -2.5, "bytes": [89, 111]},
                ],
            }
        ],
        "refusal": None,
    }
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 0}
    with pytest.raises(ValueError, match="finish_reason must be one of"):
        chat_completion(
            id="c",
            created=1,
            model="m",
            output=ParsedOutput("", None, ()),
            finish_reason="eos",
            usage=USAGE,
        )


def _stream(include_usage: bool, named_tool: bool = False) -> ChatStream:
    parser = ChatOutputParser(
        "glm47", tools={"f": None}, reasoning="inside", id_factory=lambda: "call_z"
    )
    return ChatStream(
        id="chatcmpl-9",
        created=5,
        model="m",
        parser=parser,
        include_usage=include_usage,
        named_tool=named_tool,
    )


PIECES = [
    "Plan.",
    "</think>",
    "<tool_call>f",
    "<arg_key>a</arg_key><arg_value>1</arg_value>",
    "</tool_call>",
]


def test_openai_stream_bytes_with_usage() -> None:
    stream, events = _stream(include_usage=True), OpenAIEvents()
    out = events.chunk(stream.start())
    for piece in PIECES:
        out += b"".join(events.chunk(c) for c in stream.text(piece))
    out += b"".join(events.chunk(c) for c in stream.finish("stop", USAGE)) + events.end(USAGE)
    head = '"id":"chatcmpl-9","object":"chat.completion.chunk","created":5,"model":"m","system_fingerprint":null'
    assert out.decode() == (
        f'data: {{{head},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}],"usage":null}}\n\n'
        f'data: {{{head},"choices":[{{"index":0,"delta":{{"reasoning_content":"Plan.","reasoning":"Plan."}},"logprobs":null,"finish_reason":null}}],"usage":null}}\n\n'
        f'data: {{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_z","type":"function","function":{{"name":"f","arguments":"{{\\"a\\":1"}}}}]}},"logprobs":null,"finish_reason":null}}],"usage":null}}\n\n'
        f'data: {{{head},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"}}"}}}}]}},"logprobs":null,"finish_reason":null}}],"usage":null}}\n\n'
        f'data: {{{head},"choices":[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null,"matched_stop":null}}],"usage":null}}\n\n'
        f'data: {{{head},"choices":[],"usage":{{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{{"cached_tokens":8}}}}}}\n\n'
        "data: [DONE]\n\n"
    )
    assert stream.message() == ParsedOutput(None, "Plan.", (ToolCall("call_z", "f", '{"a":1}'),))


def test_workers_stream_ends_with_a_usage_event() -> None:
    stream, events = _stream(include_usage=False), WorkersEvents()
    out = events.chunk(stream.start())
    for piece in PIECES:
        out += b"".join(events.chunk(c) for c in stream.text(piece))
    out += b"".join(events.chunk(c) for c in stream.finish("stop", USAGE)) + events.end(USAGE)
    payloads = parse_sse(out)
    assert payloads[-2:] == [
        {
            "response": "",
            "usage": {
                "prompt_tokens": 12,
                "completion_tokens": 5,
                "total_tokens": 17,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
        },
        "[DONE]",
    ]
    assert all(p["object"] == "chat.completion.chunk" and "usage" not in p for p in payloads[:-2])  # type: ignore[index]
    assert out.endswith(
        b'data: {"response":"","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":8}}}\n\ndata: [DONE]\n\n'
    )


def test_held_back_logprobs_ride_on_the_next_chunk() -> None:
    stream = ChatStream(
        id="c", created=1, model="m", parser=ChatOutputParser("kimi", tools={"f": None})
    )
    assert stream.text("<|tool", [TokenLogprob("<|tool", -1.0)]) == []
    chunks = stream.text("x", [TokenLogprob("x", -0.5)])
    assert [t["token"] for t in chunks[0]["choices"][0]["logprobs"]["content"]] == ["<|tool", "x"]


def test_mid_stream_errors() -> None:
    assert WorkersEvents().error(errors.CAPACITY_TEMPORARILY_EXCEEDED) == (
        b'data: {"errors":[{"code":3040,"message":"Capacity temporarily exceeded, please try again."}]}\n\ndata: [DONE]\n\n'
    )
    assert parse_sse(OpenAIEvents().error(errors.TIMEOUT)) == [
        {
            "error": {
                "message": "Request timeout",
                "type": "invalid_request_error",
                "param": None,
                "code": 3007,
            }
        },
        "[DONE]",
    ]


@pytest.mark.parametrize(
    ("code", "fields", "status", "message"),
    [
        (errors.NO_SUCH_MODEL, {"model": "@cf/x/y"}, 400, "5007: No such model @cf/x/y or task"),
        (errors.INVALID_INPUT, {"detail": "bad"}, 400, "5006: Error: bad"),
        (errors.OUT_OF_CAPACITY, {}, 429, "3040: No more data centers to forward the request to"),
        (
            errors.CAPACITY_TEMPORARILY_EXCEEDED,
            {},
            429,
            "3040: Capacity temporarily exceeded, please try again.",
        ),
        (
            errors.ACCOUNT_LIMITED,
            {},
            429,
            "3036: You have used up your daily free allocation of 10,000 neurons. Please upgrade to Cloudflare's Workers Paid plan if you would like to continue usage.",
        ),
        (errors.TIMEOUT, {}, 408, "3007: Request timeout"),
        (errors.ABORTED, {}, 408, "3008: Request was aborted"),
        (errors.REQUEST_TOO_LARGE, {}, 413, "3006: Request is too large"),
        (errors.INVALID_MODEL_ID, {}, 404, "3042: The model name is invalid"),
        (
            errors.LORA_UNSUPPORTED,
            {"model": "m"},
            405,
            "5005: The model m does not support LoRa inference",
        ),
    ],
)
def test_workers_error_codes(
    code: errors.WorkersAIErrorCode, fields: dict, status: int, message: str
) -> None:
    assert code.status == status and code.message(**fields) == message


def test_rest_envelopes() -> None:
    assert errors.rest_error_envelope(errors.NO_SUCH_MODEL, model="@cf/a/b") == {
        "result": None,
        "success": False,
        "errors": [{"code": 5007, "message": "No such model @cf/a/b or task"}],
        "messages": [],
    }
    assert errors.rest_success_envelope({"response": "hi"}) == {
        "result": {"response": "hi"},
        "success": True,
        "errors": [],
        "messages": [],
    }


def test_text_completion_and_generate() -> None:
    tokens = [TokenLogprob("a", -0.25, (TokenLogprob("a", -0.25),)), TokenLogprob("bc", -1.0)]
    assert text_completion(
        id="cmpl-1",
        created=2,
        model="m",
        text="abc",
        finish_reason="length",
        usage=Usage(3, 2),
        logprobs=completion_logprobs(tokens, 10),
    ) == {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 2,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": "abc",
                "finish_reason": "length",
                "stop_reason": None,
                "matched_stop": None,
                "logprobs": {
                    "tokens": ["a", "bc"],
                    "token_logprobs": [-0.25, -1.0],
                    "top_logprobs": [{"a": -0.25}, {}],
                    "text_offset": [10, 11],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 2,
            "total_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
        "system_fingerprint": None,
    }
    answer = generate_response(
        rid="r1",
        text="Hello",
        output_ids=[5, 6],
        usage=USAGE,
        finish_reason=generate_finish_reason("stop", matched=2),
        e2e_latency=0.5,
    )
    assert answer == {
        "text": "Hello",
        "output_ids": [5, 6],
        "meta_info": {
            "id": "r1",
            "finish_reason": {"type": "stop", "matched": 2},
            "prompt_tokens": 12,
            "completion_tokens": 5,
            "cached_tokens": 8,
            "e2e_latency": 0.5,
        },
    }
    assert generate_finish_reason("length", length=128) == {"type": "length", "length": 128}


def test_sse_data_is_one_line_of_utf8() -> None:
    assert sse_data({"t": "é\nx"}) == 'data: {"t":"é\\nx"}\n\n'.encode()
    assert json.loads(sse_data({"a": 1})[6:]) == {"a": 1}


@pytest.mark.parametrize(
    ("named", "finish_reason", "expected"),
    [
        (True, "stop", "stop"),
        (True, "length", "length"),
        (False, "stop", "tool_calls"),
        (False, "length", "length"),
    ],
)
def test_a_named_function_call_finishes_with_stop_as_openai_and_vllm_answer(
    named: bool, finish_reason: str, expected: str
) -> None:
    # vllm/entrypoints/openai/chat_completion/serving.py (both generators): "In OpenAI's API,
    # when a tool is called, the finish_reason is: "tool_calls" for "auto" or "required" tool
    # calls, and "stop" for named tool calls." (SGLang answers "tool_calls" for both.)
    output = ParsedOutput(None, None, (ToolCall("call_a", "f", '{"a":1}'),))
    choice = chat_choice(0, output, finish_reason, named_tool=named)
    assert choice["finish_reason"] == expected
    stream = _stream(include_usage=False, named_tool=named)
    for piece in PIECES:
        stream.text(piece)
    assert stream.finish(finish_reason)[-1]["choices"][0]["finish_reason"] == expected
