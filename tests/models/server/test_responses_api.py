"""The official ``openai`` client's Responses API (``client.responses``) against a real
``ember models serve`` process: create, stream (text, reasoning, function calls), a two-turn
tool loop, JSON schema output, ``previous_response_id`` and ``GET /v1/responses/{id}``, and the
400s for what ember cannot do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from tests.models.server.live import LiveServer
from tests.models.server.served_process import served_process

UNIT = {
    "type": "object",
    "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["unit"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather forecast",
    "parameters": UNIT,
    "strict": True,
}
NO_THINKING = {"effort": "none"}


@pytest.fixture(scope="module")
def url(glm_dir: Path) -> Iterator[str]:
    with served_process(glm_dir, "glm", "--kv-cache-bytes", "16MiB") as served:
        yield served.url
        assert not any("Traceback" in line for line in served.log), "\n".join(served.log)


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_create_text(url: str) -> None:
    reply = client(url).responses.create(
        model="glm",
        instructions="Answer briefly.",
        input="Write a Python function.",
        max_output_tokens=8,
        temperature=0,
        reasoning=NO_THINKING,
    )
    assert reply.id.startswith("resp_") and reply.object == "response" and reply.model == "glm"
    assert reply.status in ("completed", "incomplete")
    if reply.status == "incomplete":
        assert reply.incomplete_details.reason == "max_output_tokens"
    (message,) = reply.output
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "output_text"
    assert reply.output_text == message.content[0].text and reply.output_text
    usage = reply.usage
    assert usage.output_tokens == 8 or reply.status == "completed"
    assert usage.input_tokens > 5 and usage.input_tokens_details.cached_tokens >= 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert reply.max_output_tokens == 8 and reply.instructions == "Answer briefly."


def test_stream_equals_the_whole_answer(url: str) -> None:
    body = dict(
        model="glm",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Explain os.path."}]}],
        max_output_tokens=10,
        temperature=0,
        reasoning=NO_THINKING,
        store=False,
    )
    whole = client(url).responses.create(**body)
    with client(url).responses.stream(**body) as stream:
        events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    # The last event is named after how the response ended, as OpenAI names it.
    final = events[-1].response
    assert kinds[-1] == f"response.{whole.status}" and final.status == whole.status
    for kind in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ):
        assert kind in kinds
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text == final.output_text
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens
    strip = {"id", "created_at", "completed_at"}
    assert [_shape(i) for i in final.output] == [_shape(i) for i in whole.output]
    assert {k for k in final.to_dict() if k not in strip} == {
        k for k in whole.to_dict() if k not in strip
    }
    # create(stream=True) reads the same events.
    raw = list(client(url).responses.create(**body, stream=True))
    assert [e.type for e in raw] == kinds


def test_a_stream_cut_by_max_output_tokens_ends_with_response_incomplete(url: str) -> None:
    body = dict(
        model="glm",
        input="Explain how os.path joins paths, in detail.",
        max_output_tokens=4,
        temperature=0,
        reasoning=NO_THINKING,
        store=False,
    )
    whole = client(url).responses.create(**body)
    assert whole.status == "incomplete"  # the case under test: the limit cut it
    with client(url).responses.stream(**body) as stream:
        events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[-1] == "response.incomplete" and "response.completed" not in kinds
    final = events[-1].response
    assert final.status == "incomplete"
    assert final.incomplete_details is not None
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.output_text == whole.output_text and final.usage.output_tokens == 4
    # The raw stream names the event on its event: line too, as OpenAI's does.
    raw = httpx.post(url + "/v1/responses", json={**body, "stream": True}, timeout=120)
    names = [line for line in raw.text.splitlines() if line.startswith("event: ")]
    assert names[-1] == "event: response.incomplete"
    last = json.loads(raw.text.split("event: response.incomplete\ndata: ", 1)[1].split("\n")[0])
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def _shape(item: object) -> object:
    """An output item without its id (new per response) and the client's own ``parsed``."""
    data = item.to_dict()  # type: ignore[attr-defined]
    data.pop("id", None)
    for part in data.get("content") or []:
        part.pop("parsed", None)
    return data


def test_reasoning_is_a_reasoning_item(url: str) -> None:
    body = dict(model="glm", input="Think about sorting.", max_output_tokens=12, temperature=0)
    reply = client(url).responses.create(**body)
    reasoning = [item for item in reply.output if item.type == "reasoning"]
    assert reasoning and reasoning[0].content[0].type == "reasoning_text"
    assert reasoning[0].content[0].text
    assert reply.usage.output_tokens_details.reasoning_tokens > 0
    with client(url).responses.stream(**body) as stream:
        events = list(stream)
    final = events[-1].response  # response.incomplete: the 12 tokens cut the thinking
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought == reasoning[0].content[0].text
    assert "response.reasoning_text.done" in [e.type for e in events]
    assert final.output[0].content[0].text == thought


@pytest.mark.parametrize("stream", [False, True])
def test_function_call_matches_the_schema(url: str, stream: bool) -> None:
    body = dict(
        model="glm",
        input="Weather in Paris?",
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=64,
        temperature=0,
        reasoning=NO_THINKING,
    )
    if stream:
        with client(url).responses.stream(**body) as events:
            seen = list(events)
            reply = events.get_final_response()
        kinds = [e.type for e in seen]
        assert "response.function_call_arguments.delta" in kinds
        (done,) = [e for e in seen if e.type == "response.function_call_arguments.done"]
        assert done.arguments == reply.output[-1].arguments
    else:
        reply = client(url).responses.create(**body)
    (call,) = [item for item in reply.output if item.type == "function_call"]
    assert call.name == "get_weather" and call.call_id and call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), UNIT)
    assert reply.status == "completed"


def test_two_turn_tool_loop(url: str) -> None:
    api = client(url)
    question = [{"role": "user", "content": "Weather in Paris?"}]
    first = api.responses.create(
        model="glm",
        input=question,
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=64,
        temperature=0,
        reasoning=NO_THINKING,
        store=False,
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    history = [*question, *[item.to_dict() for item in first.output]]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "21 C"})
    turn = dict(
        model="glm",
        tools=[WEATHER],
        tool_choice="none",
        max_output_tokens=6,
        temperature=0,
        reasoning=NO_THINKING,
    )
    second = api.responses.create(input=history, **turn)
    assert second.output[-1].type == "message" and second.output_text
    # The whole conversation went in: the call (its arguments) and its output too.
    alone = api.responses.create(input=question, **turn)
    grown = len(json.loads(call.arguments)) + 2
    assert second.usage.input_tokens > alone.usage.input_tokens + grown


def test_json_schema_output(url: str) -> None:
    reply = client(url).responses.create(
        model="glm",
        input="Units?",
        text={"format": {"type": "json_schema", "name": "units", "schema": UNIT, "strict": True}},
        max_output_tokens=64,
        temperature=0,
        reasoning=NO_THINKING,
    )
    assert reply.status == "completed"
    jsonschema.validate(json.loads(reply.output_text), UNIT)
    assert reply.text.format.type == "json_schema"
    obj = client(url).responses.create(
        model="glm",
        input="An object",
        text={"format": {"type": "json_object"}},
        max_output_tokens=48,
        temperature=0,
        reasoning=NO_THINKING,
    )
    assert obj.output_text.lstrip().startswith("{")
    if obj.status == "completed":
        assert isinstance(json.loads(obj.output_text), dict)


def test_previous_response_id_and_retrieve(url: str) -> None:
    api = client(url)
    first = api.responses.create(
        model="glm", input="Hello", max_output_tokens=4, temperature=0, reasoning=NO_THINKING
    )
    again = api.responses.retrieve(first.id)
    assert again.id == first.id and again.output_text == first.output_text
    second = api.responses.create(
        model="glm",
        previous_response_id=first.id,
        input="And then?",
        max_output_tokens=4,
        temperature=0,
        reasoning=NO_THINKING,
    )
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    with pytest.raises(openai.NotFoundError) as caught:
        api.responses.create(model="glm", previous_response_id="resp_nope", input="x")
    assert "resp_nope" in caught.value.message
    assert caught.value.param == "previous_response_id"
    with pytest.raises(openai.NotFoundError) as missing:
        api.responses.retrieve("resp_missing")
    assert "resp_missing" in missing.value.message
    with pytest.raises(openai.BadRequestError) as replay:
        api.responses.retrieve(first.id, stream=True)
    assert replay.value.param == "stream"
    api.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        api.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        api.responses.delete(first.id)
    # The follow-up holds the whole conversation: it goes on without the first.
    third = api.responses.create(
        model="glm", previous_response_id=second.id, input="Go on.", max_output_tokens=2,
        reasoning=NO_THINKING,
    )  # fmt: skip
    assert third.usage.input_tokens > second.usage.input_tokens + second.usage.output_tokens
    unstored = api.responses.create(
        model="glm", input="x", max_output_tokens=1, store=False, reasoning=NO_THINKING
    )
    with pytest.raises(openai.NotFoundError):
        api.responses.retrieve(unstored.id)
    # A stored response's items go back by id (item_reference), an unstored one's do not.
    reference = {"type": "item_reference", "id": second.output[-1].id}
    fourth = api.responses.create(
        model="glm", input=[{"role": "user", "content": "And then?"}, reference],
        max_output_tokens=1, reasoning=NO_THINKING,
    )  # fmt: skip
    assert fourth.usage.input_tokens > second.usage.output_tokens
    with pytest.raises(openai.NotFoundError) as lost:
        api.responses.create(
            model="glm", input=[{"type": "item_reference", "id": unstored.output[-1].id}]
        )
    assert lost.value.param == "input" and unstored.output[-1].id in lost.value.message


@pytest.mark.parametrize(
    ("extra", "param", "words"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools.[0].type", "'function'"),
        ({"tools": [{"type": "file_search", "vector_store_ids": ["v"]}]}, "tools.[0].type", ""),
        ({"background": True}, "background", "false"),
        ({"include": ["reasoning.encrypted_content"]}, "include.[0]", "encrypted"),
        ({"truncation": "auto"}, "truncation", "'disabled'"),
        ({"conversation": "conv_1"}, "conversation", "previous_response_id"),
        ({"frobnicate": 1}, "frobnicate", "Unknown parameter"),
        ({"input": [{"type": "file_search_call", "id": "x"}]}, "input.[0].type", "function_call"),
        ({"text": {"format": {"type": "grammar"}}}, "text.format.type", "json_schema"),
        ({"temperature": -1}, "temperature", "temperature"),
    ],
)
def test_unsupported_fields_are_400s_naming_them(
    url: str, extra: dict, param: str, words: str
) -> None:
    body = {"model": "glm", "input": "hi", "max_output_tokens": 1, **extra}
    response = httpx.post(url + "/v1/responses", json=body, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and words in error["message"]
    assert error["type"] == "invalid_request_error"


def test_unknown_model_is_a_404(url: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client(url).responses.create(model="gpt-5", input="hi", max_output_tokens=1)
    assert caught.value.code == "model_not_found"


def test_kimi_text_and_function_call(kimi: LiveServer) -> None:
    """Kimi's own tool-call syntax comes out as the same items (the tiny Kimi closes its
    thinking at once: its answer is a message)."""
    api = openai.OpenAI(base_url=kimi.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    text = api.responses.create(model="kimi", input="hi", max_output_tokens=8, temperature=0)
    assert text.output[-1].type == "message" and text.output_text
    call = api.responses.create(
        model="kimi",
        input="Weather?",
        tools=[WEATHER],
        tool_choice="required",
        max_output_tokens=64,
        temperature=0,
        reasoning=NO_THINKING,
    )
    (item,) = [i for i in call.output if i.type == "function_call"]
    jsonschema.validate(json.loads(item.arguments), UNIT)


@pytest.mark.parametrize("stream", [False, True])
def test_a_reasoning_summary_asked_for_is_the_reasoning_text(url: str, stream: bool) -> None:
    """The AI SDK's OpenAI provider (@ai-sdk/openai 3.0.141, with providerOptions.openai
    {forceReasoning: true, reasoningSummary: "auto"}) sends this body and reads reasoning only
    from ``summary`` parts and ``response.reasoning_summary_text.delta`` events
    (src/responses/openai-responses-language-model.ts)."""
    body = {
        "model": "glm",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Say hi"}]}],
        "max_output_tokens": 12,
        "reasoning": {"summary": "detailed"},
        "temperature": 0,  # not the SDK's: greedy, so the tiny model always thinks first
        **({"stream": True} if stream else {}),
    }
    reply = httpx.post(url + "/v1/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    if stream:
        events = [json.loads(line[6:]) for line in reply.text.split("\n") if line[:6] == "data: "]
        kinds = [e["type"] for e in events]
        assert kinds.index("response.reasoning_summary_part.added") < kinds.index(
            "response.reasoning_summary_text.done"
        )
        summary = "".join(
            e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta"
        )
        output = events[-1]["response"]["output"]
    else:
        output = reply.json()["output"]
    (reasoning,) = [item for item in output if item["type"] == "reasoning"]
    text = reasoning["content"][0]["text"]
    assert text and reasoning["summary"] == [{"type": "summary_text", "text": text}]
    if stream:
        assert summary == text
