"""The Responses translation on its own: a chat chunk stream's events against the whole
``chat.completion``'s response (the slow reference: the answer assembled, then translated once)
on random streams, input items to chat messages, the bounded store, and streams that fail."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.errors import InvalidModelInput
from ember.models.api.chat_request import parse_chat_request
from ember.models.api.errors import InvalidRequestField
from ember.models.api.responses_call import ResponsesCall
from ember.models.api.responses_events import ResponseEvents
from ember.models.api.responses_input import chat_messages, input_items
from ember.models.api.responses_object import from_chat_completion
from ember.models.api.responses_request import KNOWN
from ember.models.api.responses_store import ItemNotFound, ResponseNotFound, ResponseStore

ECHO = {"store": True}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=4)))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if text[a:b]]


@st.composite
def answers(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A chat answer (its message, finish reason, usage) and a chunk stream that carries it."""
    reasoning = draw(st.none() | TEXT)
    content = draw(st.none() | TEXT)
    calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": draw(st.sampled_from(["f", "get_weather"])),
                      "arguments": json.dumps({"n": draw(st.integers(0, 99))})}}
        for i in range(draw(st.integers(0, 2)))
    ]  # fmt: skip
    finish = draw(st.sampled_from(["stop", "length", "tool_calls"]))
    usage = {
        "prompt_tokens": draw(st.integers(1, 50)),
        "completion_tokens": draw(st.integers(0, 50)),
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    chunks: list[dict[str, Any]] = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]}]
    for piece in _pieces(draw, reasoning or ""):
        chunks.append({"choices": [{"delta": {"reasoning_content": piece}}]})
    for piece in _pieces(draw, content or ""):
        chunks.append({"choices": [{"delta": {"content": piece}}]})
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}  # fmt: skip
        chunks.append({"choices": [{"delta": {"tool_calls": [head]}}]})
        for piece in _pieces(draw, call["function"]["arguments"]):
            delta = {"index": index, "function": {"arguments": piece}}
            chunks.append({"choices": [{"delta": {"tool_calls": [delta]}}]})
    chunks.append({"choices": [{"delta": {}, "finish_reason": finish}]})
    chunks.append({"choices": [], "usage": usage})
    message = {"role": "assistant", "content": content, "tool_calls": calls or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    completion = {"model": "m", "choices": [{"message": message, "finish_reason": finish}]}
    return {**completion, "usage": usage}, chunks


def _without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k != "id"} for item in items]


@settings(max_examples=200, deadline=None)
@given(answers())
def test_streamed_response_matches_the_whole_one(answer: tuple[dict, list[dict]]) -> None:
    completion, chunks = answer
    reference = from_chat_completion(completion, id="resp_x", model="m", created_at=1, echo=ECHO)
    stream = ResponseEvents("resp_x", "m", 1, ECHO)
    events = stream.start()
    for chunk in chunks:
        events += stream.feed(chunk)
    events += stream.finish()
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    assert events[-1]["type"] == f"response.{final['status']}" and final == stream.response
    assert _without_ids(final["output"]) == _without_ids(reference["output"])
    for key in ("status", "incomplete_details", "usage"):
        assert final[key] == reference[key]
    # Each item: added once, done once with the same id and index; the deltas add up.
    added = [e for e in events if e["type"] == "response.output_item.added"]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [e["item"]["id"] for e in added] == [e["item"]["id"] for e in done]
    assert [e["output_index"] for e in done] == list(range(len(final["output"])))
    for item in final["output"]:
        deltas = "".join(e["delta"] for e in events if e.get("item_id") == item["id"]
                         and e["type"].endswith(".delta"))  # fmt: skip
        text = item.get("arguments") if item["type"] == "function_call" else None
        assert deltas == (text if text is not None else item["content"][0]["text"])


def test_a_failed_stream_ends_with_error_and_failed_and_is_not_stored() -> None:
    store = ResponseStore()
    call = ResponsesCall({"input": "hi", "stream": True}, store, "t", "m")

    async def batches():  # noqa: ANN202
        yield [{"choices": [{"delta": {"content": "Hel"}}]}]
        yield [{"error": {"message": "engine died", "code": 500}}]

    async def collect() -> list[bytes]:
        return [data async for data in call.events(batches())]

    text = b"".join(asyncio.run(collect())).decode()
    kinds = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
    assert kinds[-2:] == ["error", "response.failed"]
    assert "response.output_item.done" in kinds and len(store) == 0


def test_function_calls_join_one_assistant_message_and_reasoning_rides_on_it() -> None:
    items = input_items(
        [
            {"role": "user", "content": "weather?"},
            {"type": "reasoning", "id": "rs_1", "summary": [],
             "content": [{"type": "reasoning_text", "text": "think"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "1"},
            {"type": "function_call_output", "call_id": "c2",
             "output": [{"type": "input_text", "text": "2"}]},
            {"type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "done", "annotations": []}]},
        ]
    )  # fmt: skip
    messages = chat_messages(items)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert messages[1]["reasoning_content"] == "think"
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c1", "c2"]
    assert messages[3]["content"] == "2" and messages[4]["content"] == "done"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}],
         "/input/0/content/0/type"),
        ([{"type": "item_reference", "id": 7}], "/input/0/id"),
        ([{"type": "web_search_call", "id": "ws_1"}], "/input/0/type"),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], "/input/0/call_id"),
        ([{"role": "tool", "content": "x"}], "/input/0/role"),
        (3, "/input"),
    ],
)  # fmt: skip
def test_input_items_refused_name_the_field(value: object, field: str) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        input_items(value)
    assert caught.value.field == field


def test_store_is_bounded_and_scoped() -> None:
    store = ResponseStore(max_responses=2, max_bytes=10_000)
    for n in range(3):
        store.put("a", {"id": f"resp_{n}", "output": []}, ())
    with pytest.raises(ResponseNotFound) as caught:
        store.get("a", "resp_0", "previous_response_id")
    assert "resp_0" in str(caught.value) and caught.value.param == "previous_response_id"
    assert store.get("a", "resp_2").response["id"] == "resp_2"
    with pytest.raises(ResponseNotFound):
        store.get("b", "resp_2")  # another tenant's
    store.put("a", {"id": "big", "output": [{"text": "x" * 20_000}]}, ())
    assert len(store) == 0  # past max_bytes: even the newest goes
    store.put("a", {"id": "r", "output": [{"type": "message"}]}, ({"role": "user"},))
    assert store.get("a", "r").conversation() == [{"role": "user"}, {"type": "message"}]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-3, 3) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = sorted(KNOWN) + ["input.0", "tools.0", "text.format", "tool_choice.tools", "zz"]


@st.composite
def hostile_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"input": "hi", "model": "m"}
    for name in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3)):
        value = draw(JSON_VALUES | st.sampled_from(SHAPES))
        key, _, inner = name.partition(".")
        if inner == "0":
            body[key] = [value]
        elif inner:
            body[key] = {
                inner: value,
                "type": draw(st.sampled_from(["function", "allowed_tools", "json_schema"])),
            }
        else:
            body[key] = value
    return body


SHAPES = [
    {"type": "function", "name": "f", "parameters": {"type": "object"}},
    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    {"type": "item_reference", "id": "rs_never_stored"},
    {"type": "reasoning", "content": [{"type": "reasoning_text", "text": 1}]},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    {"type": "json_schema", "name": "x", "schema": {"type": "object"}},
    {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]},
]


@settings(max_examples=400, deadline=None)
@given(hostile_bodies())
def test_any_body_is_served_or_refused_naming_a_field(body: dict[str, Any]) -> None:
    """Whatever a client sends is a request or an InvalidRequestField, never another error
    (which the routes would answer with a 500)."""
    try:
        call = ResponsesCall(body, ResponseStore(), "t", "m")
        parse_chat_request(call.chat_body(), dialect="openai", max_temperature=None)
    except InvalidModelInput as exc:
        assert exc.field.startswith("/")
    except ItemNotFound as exc:  # a 404 naming the input item
        assert exc.param == "input" and "rs_never_stored" in str(exc)
    except ResponseNotFound as exc:  # a 404 naming it
        assert exc.response_id == body["previous_response_id"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}},
         "/tool_choice/name"),
        ({"tools": [{**WEATHER, "parameters": 3}]}, "/tools/0/parameters"),
        ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}]},
         "/input"),
        ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": 3}}}},
         "/text/format/schema"),
    ],
)  # fmt: skip
def test_chat_errors_name_the_responses_field(extra: dict, field: str) -> None:
    with pytest.raises(InvalidRequestField) as caught:
        ResponsesCall({"input": "hi", **extra}, ResponseStore(), "t", "m")
    assert caught.value.field.startswith(field), caught.value


def test_one_tenants_traffic_does_not_push_out_anothers_responses() -> None:
    store = ResponseStore(max_responses=3, max_bytes=10_000, max_total_bytes=20_000)
    store.put("quiet", {"id": "keep", "output": []}, ())
    for n in range(50):  # a busy tenant: its own oldest go, the quiet tenant's stay
        store.put("busy", {"id": f"r{n}", "output": []}, ())
    assert store.get("quiet", "keep").response["id"] == "keep"
    assert len(store) == 4
    # Past the total, the scope holding the most bytes gives up its oldest first.
    store.put("quiet", {"id": "big", "output": [{"text": "x" * 9_000}]}, ())
    store.put("busy", {"id": "huge", "output": [{"text": "y" * 9_500}]}, ())
    store.put("third", {"id": "t", "output": [{"text": "z" * 3_000}]}, ())
    assert store.get("third", "t") and store.get("quiet", "big")
    store.delete("quiet", "keep")
    with pytest.raises(ResponseNotFound):
        store.delete("quiet", "keep")


def test_item_references_resolve_to_the_stored_items() -> None:
    """The AI SDK's OpenAI provider (@ai-sdk/openai 3.0.141, responses/
    convert-to-openai-responses-input.ts) sends a stored response's reasoning and message items
    back as ``{"type": "item_reference", "id"}`` (its default, ``store`` true) on every
    follow-up turn and tool step: each becomes the item it names, as OpenAI resolves them."""
    store = ResponseStore()
    first = ResponsesCall({"input": "weather?"}, store, "t", "m")
    completion = {
        "model": "m",
        "choices": [{"finish_reason": "stop", "message": {
            "role": "assistant", "content": "sunny", "reasoning_content": "think"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }  # fmt: skip
    reasoning, message = first.whole(completion)["output"]
    follow_up = {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "item_reference", "id": reasoning["id"]},
            {"type": "item_reference", "id": message["id"]},
            {"role": "user", "content": [{"type": "input_text", "text": "again"}]},
        ],
    }
    messages = ResponsesCall(follow_up, store, "t", "m").chat_body()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == "sunny" and messages[1]["reasoning_content"] == "think"
    # Another tenant's ids, and ids nobody stored, are OpenAI's 404 naming the item.
    for scope, missing in (("other", message["id"]), ("t", "rs_gone")):
        body = {"input": [{"type": "item_reference", "id": missing}]}
        with pytest.raises(ItemNotFound) as caught:
            ResponsesCall(body, store, scope, "m")
        assert caught.value.param == "input" and missing in str(caught.value)
        assert isinstance(caught.value, ResponseNotFound)  # every route's 404 handler
