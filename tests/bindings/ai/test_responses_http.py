"""The Responses API on a real ``ember dev``'s AI routes (``/ai/v1/responses`` and
``/client/v4/accounts/{account}/ai/v1/responses``) with the official ``openai`` client: Workers
AI model ids, the chat route's errors and options, streams, tool loops, JSON schema output and
stored responses (one store per tenant)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator

import httpx
import jsonschema
import openai
import pytest

from tests.bindings.ai.dev_support import DevServer, serve_ai_project
from tests.bindings.ai.support import GLM
from tests.bindings.ai.test_dev_http import UNIT

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather forecast",
    "parameters": UNIT,
}
QUIET = {"effort": "none"}  # thinking off: the tiny model's answer is text


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-ai-responses")


def client(dev: DevServer, base: str = "/ai/v1") -> openai.OpenAI:
    return openai.OpenAI(base_url=dev.url + base, api_key="unused", max_retries=0, timeout=120)


def test_create_and_stream_agree(dev: DevServer) -> None:
    body = dict(
        model=GLM,
        instructions="Be brief.",
        input="hi",
        max_output_tokens=6,
        temperature=0,
        reasoning=QUIET,
        # Workers AI's options and session affinity pass as on the chat route.
        extra_body={"options": {"rejectIfBusy": False}},
        extra_headers={"x-session-affinity": "ses_responses"},
    )
    api = client(dev)
    whole = api.responses.create(**body)
    assert whole.model == GLM and whole.id.startswith("resp_") and whole.output_text
    assert whole.usage.output_tokens == 6 and whole.status == "incomplete"
    assert whole.incomplete_details.reason == "max_output_tokens"
    with api.responses.stream(**body) as stream:
        events = list(stream)
    kinds = [event.type for event in events]
    # Cut by max_output_tokens: the last event says so, as OpenAI's does.
    assert kinds[0] == "response.created" and kinds[-1] == "response.incomplete"
    final = events[-1].response
    assert final.output_text == whole.output_text and final.status == "incomplete"
    assert final.usage.output_tokens == 6 and final.model == GLM


def test_reasoning_item(dev: DevServer) -> None:
    reply = client(dev).responses.create(model=GLM, input="hi", max_output_tokens=6)
    assert reply.output[0].type == "reasoning" and reply.output[0].content[0].text
    assert reply.usage.output_tokens_details.reasoning_tokens > 0


def test_function_call_stream_and_tool_loop(dev: DevServer) -> None:
    api = client(dev)
    question = [{"role": "user", "content": "Weather in Paris?"}]
    turn = dict(model=GLM, tools=[WEATHER], max_output_tokens=64, temperature=0, reasoning=QUIET)
    with api.responses.stream(input=question, tool_choice="required", **turn) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), UNIT)
    history = [*question, *[item.to_dict() for item in first.output]]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "21 C"})
    second = api.responses.create(input=history, tool_choice="none", **turn)
    assert second.output[-1].type == "message" and second.status in ("completed", "incomplete")
    # The call and its output went in (tool_choice none: the template lists no tools).
    alone = api.responses.create(input=question, tool_choice="none", **turn)
    assert second.usage.input_tokens > alone.usage.input_tokens + 4


def test_json_schema_output(dev: DevServer) -> None:
    reply = client(dev).responses.create(
        model=GLM,
        input="Units?",
        text={"format": {"type": "json_schema", "name": "unit", "schema": UNIT, "strict": True}},
        max_output_tokens=64,
        temperature=0,
        reasoning=QUIET,
    )
    jsonschema.validate(json.loads(reply.output_text), UNIT)


def test_previous_response_id_in_the_one_dev_account(dev: DevServer) -> None:
    local = client(dev)
    first = local.responses.create(model=GLM, input="hi", max_output_tokens=3, reasoning=QUIET)
    # /ai/v1 is the local account's; its REST prefix reads the same store.
    same = client(dev, "/client/v4/accounts/local/ai/v1")
    assert same.responses.retrieve(first.id).output_text == first.output_text
    second = same.responses.create(
        model=GLM, previous_response_id=first.id, input="more", max_output_tokens=3,
        reasoning=QUIET,
    )  # fmt: skip
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    # ember dev serves one account, the project's (its workers' env.AI too), whatever account id
    # a path names; tenants apart are the store's own test (test_responses_translation.py).
    other = client(dev, "/client/v4/accounts/other/ai/v1")
    assert other.responses.retrieve(first.id).output_text == first.output_text
    other.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError) as caught:
        local.responses.retrieve(first.id)
    assert first.id in caught.value.message
    with pytest.raises(openai.NotFoundError) as chained:
        same.responses.create(model=GLM, previous_response_id=first.id, input="x")
    assert chained.value.param == "previous_response_id"


def test_item_references_as_the_ai_sdk_sends_them(dev: DevServer) -> None:
    """The AI SDK's OpenAI provider (@ai-sdk/openai 3.0.141, responses/
    convert-to-openai-responses-input.ts), ``store`` true by default, sends a turn's reasoning
    and message items back as ``item_reference``s on the next turn (and on every tool step):
    both answer, streamed too, and a reference nobody stored is OpenAI's 404 on ``input``."""
    # Greedy: sampled, the tiny model sometimes closes its thinking within the 24 tokens.
    turn = {"model": GLM, "max_output_tokens": 24, "store": True, "temperature": 0}
    question = {"role": "user", "content": [{"type": "input_text", "text": "Say hi"}]}
    post = functools.partial(httpx.post, dev.url + "/ai/v1/responses", timeout=120)
    # A thinking turn (a reasoning item: the tiny model thinks past 24 tokens) and a quiet one
    # (a message item).
    thought = post(json={**turn, "input": [question]})
    said = post(json={**turn, "input": [question], "reasoning": QUIET})
    outputs = [item for reply in (thought, said) for item in reply.json()["output"]]
    assert [item["type"] for item in outputs] == ["reasoning", "message"], outputs
    references = [{"type": "item_reference", "id": item["id"]} for item in outputs]
    again = {"role": "user", "content": [{"type": "input_text", "text": "again"}]}
    body = {**turn, "input": [question, *references, again], "reasoning": QUIET}
    second = post(json=body)
    assert second.status_code == 200, second.text
    alone = post(json={**body, "input": [question, again]})
    # The referenced answer went into the prompt (GLM's template drops an earlier turn's
    # reasoning, as the platform's does).
    assert second.json()["usage"]["input_tokens"] > alone.json()["usage"]["input_tokens"] + 4
    streamed = client(dev).responses.create(**body, stream=True)
    assert [event.type for event in streamed][-1] in ("response.completed", "response.incomplete")
    gone = {**body, "input": [question, {"type": "item_reference", "id": "rs_nobody"}]}
    missing = post(json=gone)
    assert missing.status_code == 404, missing.text
    error = missing.json()["error"]
    assert error["param"] == "input" and "Item with id 'rs_nobody' not found" in error["message"]


MISSING = "The model `@cf/x/y` does not exist or you do not have access to it."


def test_an_unknown_model_is_openais_404_model_not_found_on_both_routes(dev: DevServer) -> None:
    """No source shows what Workers AI's /ai/v1 answers for an unknown model; ember answers as
    OpenAI does there (the client raises NotFoundError), while REST ai/run keeps 5007."""
    api = client(dev)
    with pytest.raises(openai.NotFoundError) as chat:
        api.chat.completions.create(model="@cf/x/y", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError) as responses:
        api.responses.create(model="@cf/x/y", input="hi")
    for caught in (chat.value, responses.value):
        assert caught.code == "model_not_found" and caught.param == "model"
        assert caught.body["message"].startswith(MISSING)  # type: ignore[index]
    raw = httpx.post(dev.url + "/ai/v1/responses", json={"model": "@cf/x/y", "input": "hi"})
    assert raw.status_code == 404
    error = raw.json()["error"]
    # OpenAI's message first, then ember's hint: what is served, how to map the id.
    assert error.pop("message").startswith(MISSING + " ember serves ")
    assert error == {"type": "invalid_request_error", "param": "model", "code": "model_not_found"}
    rest = httpx.post(dev.url + "/client/v4/accounts/a/ai/run/@cf/x/y", json={"prompt": "x"})
    assert rest.status_code == 400 and rest.json()["errors"][0]["code"] == 5007


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools.[0].type"),
        ({"background": True}, "background"),
        ({"include": ["message.output_text.logprobs"]}, "include.[0]"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
         "input.[0].content.[0].type"),
    ],
)  # fmt: skip
def test_unsupported_fields_are_5006_naming_them(dev: DevServer, extra: dict, param: str) -> None:
    body = {"model": GLM, "input": "hi", **extra}
    response = httpx.post(dev.url + "/ai/v1/responses", json=body, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == 5006 and error["param"] == param
    assert error["message"].startswith("5006: Error: Invalid value at")


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


@pytest.mark.parametrize("stream", [False, True])
def test_the_ai_sdks_reasoning_summary_request_gets_the_reasoning(
    dev: DevServer, stream: bool
) -> None:
    """The AI SDK's OpenAI provider (@ai-sdk/openai 3.0.141, with providerOptions.openai
    {forceReasoning: true, reasoningSummary: "auto"}) sends this body and reads reasoning only
    from a reasoning item's ``summary`` (src/responses/openai-responses-language-model.ts,
    doGenerate) or, streamed, from ``response.reasoning_summary_text.delta`` events (doStream):
    ``reasoningText`` was empty against ember."""
    body = {
        "model": GLM,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Say hi"}]}],
        "max_output_tokens": 24,
        "reasoning": {"summary": "auto"},
        "temperature": 0,  # not the SDK's: greedy, so the tiny model always thinks first
        **({"stream": True} if stream else {}),
    }
    reply = httpx.post(dev.url + "/ai/v1/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    if stream:
        events = sse_events(reply.text)
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
