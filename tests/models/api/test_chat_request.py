# ruff: noqa: E501  (tables of exact request bodies, outputs and messages read best unwrapped)
"""Chat requests from OpenAI bodies and Workers AI family-B inputs: values, defaults, and how
tools and response_format choose the constraint and the output parser (bad input:
test_chat_request_errors.py)."""

from __future__ import annotations

from ember.models.api.chat_request import SamplingOptions, parse_chat_request
from ember.models.api.constraints import constraint_for, output_parser_for
from ember.models.api.messages import ChatMessage, ContentPart, HistoryToolCall
from ember.models.api.tools import FunctionTool, ResponseFormat, ToolChoice
from ember.models.constrain.tool_grammars import ToolSignature
from tests.models.api.chat_bodies import WEATHER
from tests.models.api.chat_bodies import with_fields as _with


def test_a_full_openai_body() -> None:
    request = parse_chat_request(
        {
            "model": "@cf/zai-org/glm-4.7-flash",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather "},
                        {"type": "text", "text": "in Paris?"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            ],
            "max_completion_tokens": 64,
            "max_tokens": 10,
            "temperature": 0.2,
            "top_p": 0.9,
            "top_k": 20,
            "seed": 7,
            "stop": "###",
            "frequency_penalty": 0.5,
            "presence_penalty": -0.5,
            "repetition_penalty": 1.1,
            "logprobs": True,
            "top_logprobs": 3,
            "logit_bias": {"42": -100},
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": False,
            "chat_template_kwargs": {"enable_thinking": False, "clear_thinking": True, "custom": 1},
            "reasoning_effort": "low",
            "stream": True,
            "stream_options": {"include_usage": True},
            "user": "u1",
            "metadata": {"ignored": "as OpenAI ignores unknown fields"},
            "some_future_field": 1,
        }
    )
    assert request.model == "@cf/zai-org/glm-4.7-flash"
    assert request.messages == (
        ChatMessage("developer", "Be brief."),
        ChatMessage("user", (ContentPart("text", "Weather "), ContentPart("text", "in Paris?"))),
        ChatMessage(
            "assistant",
            None,
            tool_calls=(HistoryToolCall("call_1", "get_weather", {"city": "Paris"}),),
        ),
        ChatMessage("tool", "18C", tool_call_id="call_1"),
    )
    assert request.sampling == SamplingOptions(
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        top_k=20,
        seed=7,
        stop=("###",),
        frequency_penalty=0.5,
        presence_penalty=-0.5,
        repetition_penalty=1.1,
        logit_bias={42: -100.0},
        logprobs=True,
        top_logprobs=3,
    )
    assert request.tools == (
        FunctionTool("get_weather", "Weather for a city", WEATHER["function"]["parameters"]),
    )
    assert request.tool_choice == ToolChoice("required", ("get_weather",), named=True)
    assert request.tool_choice.forced_name == "get_weather"
    assert (request.enable_thinking, request.clear_thinking, request.reasoning_effort) == (
        False,
        True,
        "low",
    )
    assert request.template_arguments() == {
        "custom": 1,
        "enable_thinking": False,
        "clear_thinking": True,
        "reasoning_effort": "low",
    }
    assert request.stream and request.include_usage and request.user == "u1"
    assert request.template_messages()[0] == {"role": "system", "content": "Be brief."}
    assert request.template_messages()[2]["tool_calls"][0]["function"]["arguments"] == {
        "city": "Paris"
    }
    assert request.template_tools() == [WEATHER]


def test_workers_defaults_and_prompt_form() -> None:
    request = parse_chat_request({"prompt": "Hello"}, dialect="workers")
    assert request.messages == (ChatMessage("user", "Hello"),) and request.from_prompt
    assert request.sampling == SamplingOptions()
    assert request.sampling.temperature == 1.0 and request.sampling.top_p == 1.0
    assert request.tool_choice == ToolChoice("none") and request.parallel_tool_calls
    assert request.enable_thinking and not request.clear_thinking
    assert request.response_format == ResponseFormat() and request.model is None
    with_tools = parse_chat_request(
        {"messages": [{"role": "user", "content": "x"}], "tools": [WEATHER]}, dialect="workers"
    )
    assert with_tools.tool_choice == ToolChoice("auto")
    assert (
        parse_chat_request({"prompt": "x", "max_tokens": 5}, dialect="workers").sampling.max_tokens
        == 5
    )


def test_response_format_shapes() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    openai = parse_chat_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "c", "schema": schema, "strict": True},
            },
        }
    )
    assert openai.response_format == ResponseFormat("json_schema", schema, "c", True)
    # Workers AI's docs put the schema directly under json_schema.
    workers = parse_chat_request(
        {"prompt": "x", "response_format": {"type": "json_schema", "json_schema": schema}},
        dialect="workers",
    )
    assert workers.response_format == ResponseFormat("json_schema", schema)
    assert parse_chat_request(
        {"prompt": "x", "response_format": {"type": "json_object"}}, dialect="workers"
    ).response_format == ResponseFormat("json_object")


def test_constraint_and_parser_follow_tool_choice_and_response_format() -> None:
    free = parse_chat_request(_with(tools=[WEATHER]))
    assert constraint_for(free, tool_format="kimi", reasoning="off") is None
    assert output_parser_for(free, tool_format="kimi", reasoning="off").tools is not None
    required = parse_chat_request(_with(tools=[WEATHER], tool_choice="required"))
    spec = constraint_for(required, tool_format="glm47", reasoning="inside")
    assert (
        spec is not None and spec.tools_required and spec.json is None and spec.parallel_tool_calls
    )
    assert spec.tools == (ToolSignature("get_weather", WEATHER["function"]["parameters"]),)
    assert spec.reasoning == "inside"
    named = parse_chat_request(
        _with(
            tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}}
        )
    )
    assert not constraint_for(named, tool_format="kimi", reasoning="off").parallel_tool_calls  # type: ignore[union-attr]
    none = parse_chat_request(
        _with(tools=[WEATHER], tool_choice="none", response_format={"type": "json_object"})
    )
    spec = constraint_for(none, tool_format="kimi", reasoning="off")
    assert spec is not None and spec.json == "object" and spec.tools == ()
    assert output_parser_for(none, tool_format="kimi", reasoning="off").tools is None
