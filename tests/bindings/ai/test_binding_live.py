"""``env.AI.run`` from real handlers in real isolates, answered by real model servers.

A generic worker runs whatever the test posts ({model, inputs, options, mode}) and returns the
result (JSON), the stream (as its response body: handed back unread, or relayed chunk by chunk
through the handler), the raw response, or the error it caught.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest
import yaml

from ember.models.api.sse import parse_sse
from tests.bindings.ai.relay_worker import WORKER
from tests.bindings.ai.support import (
    AI,
    GLM,
    HI,
    KIMI,
    TOOL,
    UNIT,
    models_section,
    tiny_checkpoints,
    wait_until,
)
from tests.runtime.harness import Harness, write_project


@pytest.fixture(scope="module")
def ai(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AI]:
    glm, kimi = tiny_checkpoints(tmp_path_factory)
    section = {"binding": "AI", "models": models_section(glm, kimi, max_running_requests=2)}
    root = tmp_path_factory.mktemp("ai-worker")
    write_project(root, WORKER, yaml.safe_dump({"ai": section}))
    harness = Harness(tmp_path_factory.mktemp("ai-state"))
    try:
        yield AI(harness, harness.deploy(root), section)
    finally:
        harness.close()


def test_run_returns_a_chat_completion_usable_both_ways(ai: AI) -> None:
    response = ai.post(GLM, {"messages": HI, "max_completion_tokens": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    result = body["result"]
    assert result["object"] == "chat.completion" and result["model"] == GLM
    assert result["usage"]["completion_tokens"] == 5
    assert result["usage"]["total_tokens"] == result["usage"]["prompt_tokens"] + 5
    assert body["checks"]["attr_equals_item"] is True
    assert len(body["checks"]["last_request_id"]) == 32
    prompt = ai.post(KIMI, {"prompt": "Hello", "max_tokens": 3}).json()["result"]
    assert prompt["model"] == KIMI and prompt["usage"]["completion_tokens"] == 3


def test_tool_markup_without_tools_never_reaches_the_content(ai: AI) -> None:
    """``env.AI.run`` with a prompt and no tools: tool-call tokens the model emits anyway are
    special tokens, skipped as SGLang and vLLM skip them (they used to show as content)."""
    section_begin = 8135  # <|tool_calls_section_begin|> in Kimi's tokenizer (kimi-tiny's too)
    inputs = {"prompt": "hi", "max_tokens": 3, "logit_bias": {str(section_begin): 100}}
    result = ai.post(KIMI, inputs).json()["result"]
    assert result["usage"]["completion_tokens"] == 3  # the model did emit them
    message = result["choices"][0]["message"]
    assert "tool_calls" not in (message.get("content") or "")
    assert "tool_calls" not in (message.get("reasoning_content") or "")


def _piped(ai: AI) -> int:
    process = ai.harness.supervisor.isolate(ai.deployment)
    assert process is not None
    return process.calls.piped


@pytest.mark.parametrize("mode", ["stream", "relay"])
def test_stream_is_the_platforms_event_format(ai: AI, mode: str) -> None:
    inputs = {"messages": HI, "max_completion_tokens": 6, "stream": True}
    before = _piped(ai)
    response = ai.post(GLM, inputs, mode=mode)
    # Returned unread, the stream is sent by the supervisor; relayed, it crosses the handler.
    assert _piped(ai) == before + (mode == "stream")
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.content)
    assert events[-1] == "[DONE]"
    final = events[-2]
    assert final["response"] == "" and final["usage"]["completion_tokens"] == 6
    chunks = events[:-2]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == GLM for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


CYCLE = {
    "name": "x",
    "schema": {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "$ref": "#/$defs/a",
    },
}


@pytest.mark.parametrize(
    ("model", "inputs", "options", "expected", "status"),
    [
        (
            "@cf/nobody/nothing",
            {"prompt": "x"},
            None,
            "5007: No such model @cf/nobody/nothing or task",
            400,
        ),
        (  # the model is looked up before the options are read, as on the platform
            "@cf/nobody/nothing",
            {"prompt": "x"},
            {"gateway": {"id": "g", "cacheTtl": -1}},
            "5007: No such model @cf/nobody/nothing or task",
            400,
        ),
        (
            GLM,
            {"messages": [{"role": "user", "content": 3}]},
            None,
            "5006: Error: Invalid value at '/messages/0/content'",
            400,
        ),
        (
            GLM,
            {"prompt": "x", "messages": HI},
            None,
            "5006: Error: Invalid value at '/': expected exactly one of",
            400,
        ),
        (
            GLM,
            {"prompt": "x", "temperature": 7},
            None,
            "5006: Error: Invalid value at '/temperature'",
            400,
        ),
        (
            GLM,
            {"prompt": "x"},
            {"gateway": {"id": "g", "cacheTtl": -1}},
            "5006: Error: Invalid option at 'options.gateway.cacheTtl'",
            400,
        ),
        (  # review26: a $ref cycle no value ends was a 500 "dead end" from the replica
            GLM,
            {"messages": HI, "response_format": {"type": "json_schema", "json_schema": CYCLE}},
            None,
            "5006: Error: Invalid value at '/response_format/json_schema/schema/$ref'",
            400,
        ),
        (  # review26: any number of tools was taken (OpenAI: 128)
            GLM,
            {"messages": HI, "tools": [{"name": f"t{i}", "parameters": UNIT} for i in range(129)]},
            None,
            "5006: Error: Invalid value at '/tools': expected at most 128 tools",
            400,
        ),
    ],
)
def test_errors_raise_inference_upstream_error(
    ai: AI, model: str, inputs: dict, options: dict | None, expected: str, status: int
) -> None:
    error = ai.post(model, inputs, options).json()
    assert error["type"] == "InferenceUpstreamError"
    assert error["message"].startswith(expected)
    assert error["code"] == int(expected[:4]) and error["status"] == status


@pytest.mark.parametrize("model", [GLM, KIMI])
def test_tool_calls_have_json_string_arguments_whole_and_streamed(ai: AI, model: str) -> None:
    inputs = {
        "messages": HI,
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_completion_tokens": 200,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    result = ai.post(model, inputs).json()["result"]
    choice = result["choices"][0]
    assert choice["finish_reason"] == "stop"  # a named function, as OpenAI and vLLM
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert isinstance(call["function"]["arguments"], str)
    jsonschema.validate(json.loads(call["function"]["arguments"]), UNIT)
    events = parse_sse(ai.post(model, {**inputs, "stream": True}, mode="stream").content)
    pieces = [
        d
        for e in events
        if isinstance(e, dict) and e.get("choices")
        for d in e["choices"][0]["delta"].get("tool_calls", [])
    ]
    # One complete delta, as the platform streams a call (whole_tool_calls.py), for both.
    (streamed,) = pieces
    assert streamed["id"] and streamed["type"] == "function" and streamed["index"] == 0
    assert streamed["function"]["name"] == "get_weather"
    jsonschema.validate(json.loads(streamed["function"]["arguments"]), UNIT)


def test_json_schema_holds_whole_and_while_streaming(ai: AI) -> None:
    inputs = {
        "messages": HI,
        "response_format": {"type": "json_schema", "json_schema": {"name": "u", "schema": UNIT}},
        "max_completion_tokens": 200,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    result = ai.post(GLM, inputs).json()["result"]
    jsonschema.validate(json.loads(result["choices"][0]["message"]["content"]), UNIT)
    events = parse_sse(ai.post(GLM, {**inputs, "stream": True}, mode="stream").content)
    content = "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in events
        if isinstance(e, dict) and e.get("choices")
    )
    jsonschema.validate(json.loads(content), UNIT)


def test_json_mode_cut_short_raises_json_mode_couldnt_be_met(ai: AI) -> None:
    # The audit's repro: thinking and JSON share 40 tokens, and the answer ends before the JSON
    # does (content null, finish_reason "length"). The platform raises instead of answering.
    inputs = {
        "prompt": "Give a json",
        "max_tokens": 40,
        "response_format": {"type": "json_object"},
        "temperature": 0,  # greedy: the same cut-short answer every run
    }
    error = ai.post(GLM, inputs).json()
    assert error["type"] == "InferenceUpstreamError", error
    assert error["message"].startswith("5006: JSON Mode couldn't be met"), error
    assert "max_tokens" in error["message"] and "'length'" in error["message"]
    assert error["code"] == 5006 and error["status"] == 400
    # Thinking (on by default) shared the budget: the hint says how to turn it off.
    assert "thinking" in error["message"], error
    assert '"chat_template_kwargs": {"enable_thinking": false}' in error["message"]
    # Streamed, the tokens already went out: the stream ends with the same error event.
    events = parse_sse(ai.post(GLM, {**inputs, "stream": True}, mode="stream").content)
    assert events[-1] == "[DONE]"
    (failed,) = events[-2]["errors"]
    assert failed["code"] == 5006 and failed["message"].startswith("JSON Mode couldn't be met")
    assert not any(isinstance(e, dict) and e.get("usage") and "response" in e for e in events)


def test_raw_prompt_skips_the_chat_template(ai: AI) -> None:
    prompt = "<|user|>Say hi<|assistant|>"
    inputs = {"prompt": prompt, "raw": True, "max_tokens": 6, "temperature": 0}
    result = ai.post(GLM, inputs).json()["result"]
    assert result["object"] == "chat.completion"
    # Exactly what the model server answers for the untemplated text.
    direct = httpx.post(
        ai.replica_url(GLM) + "/v1/completions",
        json={"model": GLM, "prompt": prompt, "max_tokens": 6, "temperature": 0},
        timeout=60,
    ).json()
    assert result["usage"]["prompt_tokens"] == direct["usage"]["prompt_tokens"]
    assert result["choices"][0]["message"]["content"] == direct["choices"][0]["text"]
    templated = ai.post(GLM, {**inputs, "raw": False}).json()["result"]
    assert templated["usage"]["prompt_tokens"] > result["usage"]["prompt_tokens"]
    # Streamed: chat chunks carrying the same text, then the platform's usage event.
    events = parse_sse(ai.post(GLM, {**inputs, "stream": True}, mode="stream").content)
    text = "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in events
        if isinstance(e, dict) and e.get("choices")
    )
    assert text == direct["choices"][0]["text"]
    assert events[-2]["response"] == "" and events[-2]["usage"] == result["usage"]
    # raw with messages is refused, naming the field.
    refused = ai.post(GLM, {"messages": HI, "raw": True}).json()
    assert refused["code"] == 5006 and "'/raw'" in refused["message"], refused


def test_raw_response_is_returned_as_is(ai: AI) -> None:
    ok = ai.post(GLM, {"prompt": "x", "max_tokens": 2}, {"returnRawResponse": True}, "raw")
    assert ok.status_code == 200 and ok.headers["content-type"] == "application/json"
    assert ok.json()["object"] == "chat.completion" and ok.headers["cf-ai-req-id"]
    bad = ai.post("@cf/x/y", {"prompt": "x"}, {"returnRawResponse": True}, "raw")
    assert bad.status_code == 400
    assert bad.json()["internalCode"] == 5007 and bad.json()["errors"][0]["code"] == 5007


def test_gateway_cache_hit_skip_and_miss(ai: AI) -> None:
    inputs = {"prompt": "cache me", "max_tokens": 4, "seed": 1}
    options = {"returnRawResponse": True, "gateway": {"id": "gw", "cacheTtl": 60}}
    first = ai.post(GLM, inputs, options, "raw")
    second = ai.post(GLM, inputs, options, "raw")
    assert first.headers["cf-aig-cache-status"] == "MISS"
    assert second.headers["cf-aig-cache-status"] == "HIT"
    assert second.json() == first.json()
    skipped = ai.post(
        GLM, inputs, {**options, "gateway": {**options["gateway"], "skipCache": True}}, "raw"
    )
    assert "cf-aig-cache-status" not in skipped.headers
    assert skipped.json()["id"] != first.json()["id"]
    streamed = {**inputs, "stream": True}
    once = ai.post(GLM, streamed, options, "raw")
    again = ai.post(GLM, streamed, options, "raw")
    assert again.headers["cf-aig-cache-status"] == "HIT" and again.content == once.content


def test_queue_request_then_poll(ai: AI) -> None:
    batch = {
        "requests": [
            {"prompt": "one", "max_tokens": 2, "external_reference": "first"},
            {"messages": HI, "max_tokens": 3},
        ]
    }
    queued = ai.post(GLM, batch, {"queueRequest": True}).json()["result"]
    assert queued["status"] == "queued" and queued["model"] == GLM
    deadline = time.monotonic() + 60
    while True:
        polled = ai.post(GLM, {"request_id": queued["request_id"]}).json()["result"]
        if "responses" in polled:
            break
        assert polled["status"] in ("queued", "running") and time.monotonic() < deadline
        time.sleep(0.2)
    first, second = polled["responses"]
    assert first["success"] and first["external_reference"] == "first"
    assert second["result"]["usage"]["completion_tokens"] == 3
    assert polled["usage"]["completion_tokens"] == 5
    bad = ai.post(GLM, {"requests": [{"prompt": 4}]}, {"queueRequest": True}).json()
    assert bad["message"].startswith("5006: Error: Invalid value at '/requests/0/prompt'")


LONG = {"messages": HI, "max_completion_tokens": 2000, "ignore_eos": True, "stream": True}


def test_piped_and_relayed_streams_carry_the_same_answer(ai: AI) -> None:
    inputs = {"messages": HI, "max_completion_tokens": 12, "stream": True, "temperature": 0}
    texts = {}
    for mode in ("stream", "relay"):
        events = parse_sse(ai.post(GLM, inputs, mode=mode).content)
        assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] == 12
        texts[mode] = "".join(e.get("response") or "" for e in events[:-1])
    assert texts["stream"] == texts["relay"]


@pytest.mark.parametrize("mode", ["stream", "relay"])
def test_reject_if_busy_fails_fast_and_disconnect_stops_generation(ai: AI, mode: str) -> None:
    ask = {"model": GLM, "inputs": LONG, "mode": mode}
    clients = [ai.client() for _ in range(2)]
    streams = [c.stream("POST", "/", json=ask) for c in clients]
    readers = []  # kept alive: dropping a line iterator closes its connection
    try:
        for stream in streams:
            readers.append(stream.__enter__().iter_lines())
            assert next(readers[-1]).startswith("data: ")
        wait_until(lambda: ai.running(GLM) == 2, "both long requests to run")
        busy = ai.post(GLM, {"prompt": "x"}, {"rejectIfBusy": True}).json()
        assert busy["message"] == "3040: Capacity temporarily exceeded, please try again."
        assert busy["status"] == 429
    finally:
        for stream, client in zip(streams, clients, strict=True):
            stream.__exit__(None, None, None)
            client.close()
    # The clients went away: the handlers' AI calls are cancelled and the replica stops.
    wait_until(lambda: ai.running(GLM) == 0, "the replica to drop both requests", 20)


def test_request_timeout_is_3007(ai: AI) -> None:
    inputs = {**LONG, "stream": False}
    error = ai.post(GLM, inputs, {"gateway": {"id": "g", "requestTimeoutMs": 300}}).json()
    assert error["message"] == "3007: Request timeout" and error["status"] == 408
    wait_until(lambda: ai.running(GLM) == 0, "the timed-out request to stop", 20)


def test_models_lists_ids_with_their_replicas(ai: AI, tmp_path: Path) -> None:
    worker = (
        "from workers import Response\n"
        "async def on_fetch(request, env):\n"
        "    return Response.json(await env.AI.models())\n"
    )
    # The same ai section: in ember dev, a project with another one reconfigures the pool.
    root = write_project(tmp_path / "lister", worker, yaml.safe_dump({"ai": ai.section}))
    deployment = ai.harness.deploy(root)
    with ai.harness.client(deployment) as client:
        rows = {row["id"]: row for row in client.get("/").json()}
    assert rows[GLM]["loaded"] is True and rows[GLM]["architecture"] == "Glm4MoeForCausalLM"
