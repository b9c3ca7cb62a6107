"""The shipped chat templates: Kimi's and GLM's formats, tools included, rendered in our Jinja
sandbox, and identical to what transformers' ``apply_chat_template`` renders from the same file."""

from __future__ import annotations

import json

import pytest

from ember.errors import CheckpointError, InvalidModelInput
from ember.models.catalog import SHIPPED
from ember.models.chat_template import ChatTemplate, normalize_messages
from ember.models.tokenizer import Tokenizer
from tests.models.chat_fixtures import (
    CHECKPOINTS,
    CONVERSATIONS,
    TOOL_CONVERSATION,
    TOOLS,
    family_tokenizer,
)

KIMI_TOOLS_JSON = json.dumps(TOOLS, separators=(",", ":"))
KIMI_TOOL_CONVERSATION = (
    f"<|im_system|>tool_declare<|im_middle|>{KIMI_TOOLS_JSON}<|im_end|>"
    "<|im_system|>system<|im_middle|>Be brief.<|im_end|>"
    "<|im_user|>user<|im_middle|>Weather in Zürich?<|im_end|>"
    # before the last plain assistant reply: reasoning blanked (K2.5's history rule)
    "<|im_assistant|>assistant<|im_middle|><think></think>"
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Zürich", "days": 2}<|tool_call_end|>'
    "<|tool_calls_section_end|><|im_end|>"
    "<|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\nsunny<|im_end|>"
    "<|im_assistant|>assistant<|im_middle|><think></think>Sunny.<|im_end|>"
    "<|im_user|>user<|im_middle|>Thanks!<|im_end|>"
    "<|im_assistant|>assistant<|im_middle|><think>"
)
GLM_TOOL_CONVERSATION = (
    "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the "
    "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
    f"<tools>\n{json.dumps(TOOLS[0], ensure_ascii=False)}\n</tools>\n\n"
    "For each function call, output the function name and arguments within the following XML "
    "format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}"
    "</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
    "<|system|>Be brief.<|user|>Weather in Zürich?"
    # before the last user turn: reasoning dropped (GLM-4.7's rule)
    "<|assistant|></think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Zürich"
    "</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>"
    "<|observation|><tool_response>sunny</tool_response>"
    "<|assistant|></think>Sunny.<|user|>Thanks!<|assistant|><think>"
)


def render(family: str, messages, tools=None, **kwargs) -> str:
    return family_tokenizer(family).apply_chat_template(messages, tools=tools, **kwargs)


def test_kimi_renders_system_user_assistant_tool_turns_and_tools() -> None:
    assert render("kimi", TOOL_CONVERSATION, TOOLS) == KIMI_TOOL_CONVERSATION


def test_glm_renders_system_user_assistant_tool_turns_and_tools() -> None:
    assert render("glm", TOOL_CONVERSATION, TOOLS) == GLM_TOOL_CONVERSATION


def test_kimi_default_system_turn_and_thinking_switch() -> None:
    hi = [{"role": "user", "content": "Hi"}]
    head = (
        "<|im_system|>system<|im_middle|>You are a helpful assistant.<|im_end|>"
        "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>"
    )
    assert render("kimi", hi) == head + "<think>"
    assert render("kimi", hi, enable_thinking=False) == head + "<think></think>"
    assert render("kimi", hi, thinking=False) == head + "<think></think>"
    assert render("kimi", hi, add_generation_prompt=False) == head.removesuffix(
        "<|im_assistant|>assistant<|im_middle|>"
    )


def test_kimi_keeps_reasoning_after_the_last_plain_reply() -> None:
    text = render("kimi", TOOL_CONVERSATION[:4])
    assert "<think>Ask the tool.</think><|tool_calls_section_begin|>" in text


def test_glm_thinking_switch_and_clear_thinking() -> None:
    hi = [{"role": "user", "content": "Hi"}]
    assert render("glm", hi) == "[gMASK]<sop><|user|>Hi<|assistant|><think>"
    assert render("glm", hi, enable_thinking=False) == "[gMASK]<sop><|user|>Hi<|assistant|></think>"
    kept = render("glm", TOOL_CONVERSATION, clear_thinking=False)
    assert "<|assistant|><think>Ask the tool.</think><tool_call>" in kept
    assert "<|assistant|><think>Easy.</think>Sunny." in kept


def test_glm_consecutive_tool_results_share_one_observation() -> None:
    second = {"role": "tool", "tool_call_id": "x", "content": "windy"}
    messages = [*TOOL_CONVERSATION[:4], second]
    text = render("glm", messages)
    assert text.count("<|observation|>") == 1
    assert "<tool_response>sunny</tool_response><tool_response>windy</tool_response>" in text


def test_openai_style_string_arguments_are_parsed_before_templating() -> None:
    call = {**TOOL_CONVERSATION[2]["tool_calls"][0]}
    call["function"] = {"name": "get_weather", "arguments": '{"city":"Zürich","days":2}'}
    messages = [*TOOL_CONVERSATION[:2], {**TOOL_CONVERSATION[2], "tool_calls": [call]}]
    for family in ("kimi", "glm"):
        assert render(family, messages) == render(family, TOOL_CONVERSATION[:3])
    normalized = normalize_messages(messages)[2]["tool_calls"][0]["function"]["arguments"]
    assert normalized == {"city": "Zürich", "days": 2}


def test_none_values_are_dropped_and_reasoning_aliases_are_accepted() -> None:
    messages = [
        {"role": "user", "content": "q", "name": None},
        {"role": "assistant", "content": "a", "reasoning": "r", "tool_calls": None},
    ]
    out = normalize_messages(messages)
    assert out[0] == {"role": "user", "content": "q"}
    assert out[1]["reasoning_content"] == "r"


@pytest.mark.parametrize("family", ["kimi", "glm"])
def test_bad_requests_are_clear_errors(family: str) -> None:
    with pytest.raises(InvalidModelInput, match="role"):
        render(family, [{"content": "no role"}])
    with pytest.raises(InvalidModelInput, match="chat_template_kwargs"):
        render(family, [{"role": "user", "content": "x"}], chat_template_kwargs={"messages": []})


def test_templates_run_in_a_sandbox() -> None:
    escape = ChatTemplate("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(InvalidModelInput, match="rejected"):
        escape.render([])
    spy = ChatTemplate("{% set ns = namespace(_x=1) %}")
    with pytest.raises(InvalidModelInput):
        spy.render([])
    raising = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(InvalidModelInput, match="roles must alternate"):
        raising.render([])


def test_a_template_that_does_not_parse_names_its_file() -> None:
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        ChatTemplate("{% if %}", origin="x/tokenizer_config.json")


@pytest.mark.oracle
@pytest.mark.parametrize("checkpoint", sorted(SHIPPED))
def test_rendering_matches_transformers(checkpoint: str) -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(CHECKPOINTS / checkpoint)
    ours = Tokenizer.from_dir(CHECKPOINTS / checkpoint)
    variants = [{}, {"enable_thinking": False}, {"thinking": False}, {"clear_thinking": False}]
    for messages in CONVERSATIONS:
        for tools in (None, TOOLS):
            for gen in (True, False):
                for kwargs in variants:
                    expected = hf.apply_chat_template(
                        messages, tools=tools, add_generation_prompt=gen, tokenize=False, **kwargs
                    )
                    got = ours.apply_chat_template(
                        messages, tools=tools, add_generation_prompt=gen, **kwargs
                    )
                    assert got == expected, (messages, tools, gen, kwargs)
        ids = hf.apply_chat_template(
            messages, tools=TOOLS, tokenize=True, add_generation_prompt=True
        )
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        assert ours.encode(ours.apply_chat_template(messages, tools=TOOLS)) == list(ids)
