"""Reasoning summaries on the Responses API: asked for (``reasoning.summary`` "auto", "concise"
or "detailed"), a reasoning item carries the model's reasoning text as its ``summary`` too, and a
stream sends the summary events in OpenAI's order; not asked, nothing changes.

Why: the AI SDK's OpenAI provider (@ai-sdk/openai 3.0.141,
src/responses/openai-responses-language-model.ts) reads reasoning only from a reasoning item's
``summary`` parts (``doGenerate``: ``for (const summary of part.summary)``) and, streaming, only
from ``response.reasoning_summary_text.delta`` (``item_id``, ``summary_index``, ``delta``: its
schema in openai-responses-api.ts), so ``reasoningText`` stayed empty on ember. The event
shapes are openai-node 6.49's ``ResponseReasoningSummaryPart{Added,Done}Event`` and
``ResponseReasoningSummaryText{Delta,Done}Event`` (resources/responses/responses.d.ts)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings

from ember.models.api.errors import InvalidRequestField
from ember.models.api.responses_call import ResponsesCall
from ember.models.api.responses_store import ResponseStore
from tests.models.api.test_responses_translation import answers

COMPLETION = {
    "model": "m",
    "choices": [{"finish_reason": "stop", "message": {
        "role": "assistant", "content": "sunny", "reasoning_content": "think hard"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
}  # fmt: skip
CHUNKS = [
    {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"delta": {"reasoning_content": "think"}}]},
    {"choices": [{"delta": {"reasoning_content": " hard"}}]},
    {"choices": [{"delta": {"content": "sunny"}}]},
    {"choices": [{"delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
]
SUMMARY = [{"type": "summary_text", "text": "think hard"}]
CONTENT = [{"type": "reasoning_text", "text": "think hard"}]


def _call(reasoning: dict[str, Any] | None, stream: bool = False) -> ResponsesCall:
    body: dict[str, Any] = {"input": "weather?", "stream": stream}
    if reasoning is not None:
        body["reasoning"] = reasoning
    return ResponsesCall(body, ResponseStore(), "t", "m")


def _events(call: ResponsesCall, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async def batches():  # noqa: ANN202
        for chunk in chunks:
            yield [chunk]

    async def collect() -> list[bytes]:
        return [data async for data in call.events(batches())]

    text = b"".join(asyncio.run(collect())).decode()
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


@pytest.mark.parametrize(
    "reasoning",
    [{"summary": "auto"}, {"summary": "concise"}, {"summary": "detailed"},
     {"generate_summary": "auto"}, {"effort": "low", "summary": "detailed"}],
)  # fmt: skip
def test_a_summary_asked_for_is_the_reasoning_text(reasoning: dict[str, Any]) -> None:
    item = _call(reasoning).whole(COMPLETION)["output"][0]
    assert item["type"] == "reasoning"
    assert item["summary"] == SUMMARY and item["content"] == CONTENT
    assert _call(reasoning).whole(COMPLETION)["reasoning"] == reasoning  # echoed as sent


@pytest.mark.parametrize("reasoning", [None, {"effort": "low"}, {"summary": None}])
def test_no_summary_unless_asked(reasoning: dict[str, Any] | None) -> None:
    item = _call(reasoning).whole(COMPLETION)["output"][0]
    assert item["summary"] == [] and item["content"] == CONTENT
    kinds = [e["type"] for e in _events(_call(reasoning, stream=True), CHUNKS)]
    assert not [k for k in kinds if "summary" in k]


def test_a_summary_that_is_not_a_known_value_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequestField) as caught:
        _call({"summary": "short"})
    assert caught.value.field == "/reasoning/summary"
    assert "'concise'" in caught.value.expected and "'detailed'" in caught.value.expected


def test_streamed_summary_events_in_openais_order() -> None:
    events = _events(_call({"summary": "auto"}, stream=True), CHUNKS)
    (added,) = [e for e in events if e["type"] == "response.output_item.added"][:1]
    rs = added["item"]["id"]
    mine = [e for e in events if e.get("item_id") == rs or e.get("item", {}).get("id") == rs]
    assert [e["type"] for e in mine] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert added["item"]["summary"] == [] and added["item"]["content"] == []
    where = {"item_id": rs, "output_index": 0, "summary_index": 0}
    _, part_added, _, delta, _, _, _, text_done, part_done, _, _, item_done = mine
    assert part_added == {**part_added, **where, "part": {"type": "summary_text", "text": ""}}
    assert delta == {**delta, **where, "delta": "think"}
    assert text_done == {**text_done, **where, "text": "think hard"}
    assert part_done == {**part_done, **where, "part": SUMMARY[0]}
    assert "status" not in part_done  # omitted when the part completed normally
    assert item_done["item"]["summary"] == SUMMARY and item_done["item"]["content"] == CONTENT
    final = events[-1]["response"]
    assert final["output"][0]["summary"] == SUMMARY and final["output"][0]["content"] == CONTENT


def test_a_summary_cut_by_the_token_limit_says_incomplete() -> None:
    cut = [*CHUNKS[:3], {"choices": [{"delta": {}, "finish_reason": "length"}]}, CHUNKS[-1]]
    events = _events(_call({"summary": "auto"}, stream=True), cut)
    (part_done,) = [e for e in events if e["type"] == "response.reasoning_summary_part.done"]
    assert part_done["status"] == "incomplete"
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["output"][0]["summary"] == SUMMARY


@settings(max_examples=100, deadline=None)
@given(answers())
def test_streamed_summaries_match_the_whole_response(answer: tuple[dict, list[dict]]) -> None:
    completion, chunks = answer
    whole = _call({"summary": "auto"}).whole(completion)
    events = _events(_call({"summary": "auto"}, stream=True), chunks)
    final = events[-1]["response"]
    strip = [{k: v for k, v in item.items() if k != "id"} for item in final["output"]]
    assert strip == [{k: v for k, v in item.items() if k != "id"} for item in whole["output"]]
    for item in final["output"]:
        if item["type"] == "reasoning":
            deltas = "".join(e["delta"] for e in events if e.get("item_id") == item["id"]
                             and e["type"] == "response.reasoning_summary_text.delta")  # fmt: skip
            assert [{"type": "summary_text", "text": deltas}] == item["summary"]
            assert deltas == item["content"][0]["text"]
