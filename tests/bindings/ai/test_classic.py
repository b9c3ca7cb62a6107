"""The classic (family A) schema's pieces: which ids speak it, its inputs, whole answers and
streams built from a replica's chat completions, and the 5007 for an id nobody serves."""

from __future__ import annotations

import json

import pytest

from ember.bindings.ai.classic import ClassicStream, classic_inputs, classic_result
from ember.bindings.ai.gateway import AIGateway, AIRequestFailed, GatewayConfig
from ember.bindings.ai.model_schema import default_schema, schema_of
from ember.errors import ConfigError
from ember.models.api.sse import parse_sse
from ember.models.pool.config import parse_pool_config

LLAMA = "@cf/meta/llama-3.1-8b-instruct"
GLM = "@cf/zai-org/glm-4.7-flash"


def test_classic_ids_default_to_classic_and_the_field_overrides() -> None:
    assert default_schema(LLAMA) == "classic"
    assert default_schema("@cf/meta/llama-3.3-70b-instruct-fp8-fast") == "classic"
    assert default_schema(GLM) == "chat-completions"
    assert default_schema("@cf/openai/gpt-oss-120b") == "responses"
    assert default_schema("my-own-model") == "chat-completions"
    assert schema_of(LLAMA, "chat-completions") == "chat-completions"
    assert schema_of(GLM, "classic") == "classic"
    pool = parse_pool_config({LLAMA: {"schema": "chat-completions"}, GLM: {}})
    assert pool.serving(LLAMA).schema == "chat-completions" and pool.serving(GLM).schema is None
    with pytest.raises(ConfigError) as bad:
        parse_pool_config({LLAMA: {"schema": "openai"}})
    assert f'ai.models."{LLAMA}".schema' in str(bad.value) and "classic" in str(bad.value)


def test_classic_inputs_take_the_platforms_defaults_and_flat_tools() -> None:
    tool = {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}
    out = classic_inputs({"prompt": "hi", "tools": [tool]})
    assert out["max_tokens"] == 256 and out["temperature"] == 0.6
    assert out["tools"] == [{"type": "function", "function": tool}]
    assert out["chat_template_kwargs"] == {"enable_thinking": False}
    kept = classic_inputs({"prompt": "hi", "max_tokens": 9, "temperature": 0})
    assert kept["max_tokens"] == 9 and kept["temperature"] == 0


def _completion(content: str | None, calls: list[dict] | None = None) -> dict:
    message = {"role": "assistant", "content": content, "tool_calls": calls or []}
    usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6, "extra": 1}
    return {"object": "chat.completion", "choices": [{"message": message}], "usage": usage}


def test_a_whole_answer_is_response_tool_calls_and_usage() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    result = classic_result(_completion(None, [call]), json_mode=False)
    usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    assert result == {
        "response": "",
        "tool_calls": [{"name": "f", "arguments": {"a": 1}}],
        "usage": usage,
    }
    assert classic_result(_completion('{"x": [1]}'), json_mode=True)["response"] == {"x": [1]}
    assert classic_result(_completion('{"x": [1]}'), json_mode=False)["response"] == '{"x": [1]}'


def _chunk(delta: dict, finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"object": "chat.completion.chunk", "choices": [choice]})


def test_a_stream_is_response_events_tool_calls_once_usage_and_done() -> None:
    usage = {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    piece = {"index": 0, "function": {"name": "f", "arguments": '{"a"'}}
    events = [
        _chunk({"role": "assistant"}),
        _chunk({"content": "Hel"}),
        _chunk({"content": "lo"}),
        _chunk({"tool_calls": [piece]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
        _chunk({}, "tool_calls"),
        json.dumps({"choices": [], "usage": {**usage, "prompt_tokens_details": None}}),
        "[DONE]",
    ]
    stream = ClassicStream()
    out = parse_sse(b"".join(stream.feed(e) for e in events) + stream.end())
    assert out == [
        {"response": "Hel"},
        {"response": "lo"},
        {"response": "", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]},
        {"response": "", "usage": usage},
        "[DONE]",
    ]
    failed = ClassicStream()
    error = json.dumps({"error": {"message": "boom", "code": 3040}})
    assert parse_sse(failed.feed(error)) == [
        {"errors": [{"code": 3040, "message": "boom"}]},
        "[DONE]",
    ]
    assert failed.done and failed.end() == b""


@pytest.mark.parametrize("project", [True, False])
def test_an_unknown_id_keeps_the_platforms_text_first_then_says_how_to_serve_it(
    project: bool,
) -> None:
    pool = parse_pool_config({GLM: {"url": "http://127.0.0.1:9"}})
    if not project:
        pool = pool.with_settings(serve_unconfigured=False)
    gateway = AIGateway(GatewayConfig(pool, project_config=project), progress=lambda line: None)
    with pytest.raises(AIRequestFailed) as missing:
        gateway.require_model(LLAMA)
    failure = missing.value.failure
    assert failure.code.code == 5007 and failure.status == 400
    assert failure.message.startswith(f"5007: No such model {LLAMA} or task. ember serves ")
    assert GLM in failure.message
    assert f'ai.models."{LLAMA}".checkpoint' in failure.hint
    assert failure.hint in failure.description
    assert ("project's config" in failure.hint) is project
    assert ("operator" in failure.hint) is not project


def test_classic_temperature_goes_to_five_as_in_the_platforms_schema() -> None:
    from ember.bindings.ai.classic import CLASSIC_MAX_TEMPERATURE
    from ember.bindings.ai.dialects import upstream_request
    from ember.models.api.errors import InvalidRequestField

    inputs = classic_inputs({"prompt": "hi", "temperature": 4.5})
    upstream = upstream_request(
        LLAMA, inputs, "workers", stream=False, max_temperature=CLASSIC_MAX_TEMPERATURE
    )
    assert upstream.body["temperature"] == 4.5
    with pytest.raises(InvalidRequestField) as hot:
        upstream_request(
            LLAMA, {**inputs, "temperature": 5.5}, "workers", stream=False, max_temperature=5
        )
    assert hot.value.field == "/temperature"
    with pytest.raises(InvalidRequestField):  # family B keeps its 0-2
        upstream_request(GLM, {"prompt": "hi", "temperature": 4.5}, "workers", stream=False)


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("top_k", 1, True),
        ("top_k", 50, True),
        ("top_k", 0, False),  # ember's model server reads 0 as off; the classic schema: 1-50
        ("top_k", 51, False),
        ("top_p", 0.001, True),
        ("top_p", 0.0, False),
        ("seed", 1, True),
        ("seed", 0, False),
        ("seed", 10_000_000_000, False),
        ("repetition_penalty", 2, True),
        ("repetition_penalty", 2.5, False),
        ("top_k", "5", False),
    ],
)
def test_classic_ranges_are_the_classic_schemas(field: str, value: object, ok: bool) -> None:
    from ember.bindings.ai.classic_schema import check_classic
    from ember.models.api.errors import InvalidRequestField

    inputs = {"prompt": "hi", field: value}
    if ok:
        assert check_classic(LLAMA, inputs) == (inputs, None)
        return
    with pytest.raises(InvalidRequestField) as bad:
        check_classic(LLAMA, inputs)
    assert bad.value.field == f"/{field}"


def test_classic_messages_carry_text_only_and_fields_it_lacks_are_dropped_with_a_note() -> None:
    from ember.bindings.ai.classic_schema import check_classic
    from ember.models.api.errors import InvalidRequestField

    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    with pytest.raises(InvalidRequestField) as typed:
        check_classic(LLAMA, {"messages": [{"role": "system", "content": "x"}, *parts]})
    assert typed.value.field == "/messages/1/content" and "Type mismatch" in str(typed.value)
    kept, note = check_classic(LLAMA, {"prompt": "hi", "n": 3, "max_completion_tokens": 9})
    assert kept == {"prompt": "hi"}
    assert note is not None and "'n'" in note and "max_tokens" in note
    # With max_completion_tokens gone, the classic default applies, as on the platform.
    assert classic_inputs(kept)["max_tokens"] == 256
