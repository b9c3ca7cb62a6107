"""Training text of a chat example: the prompt as the family's template renders it, plus the
completion exactly as the model should emit it (reasoning, content, native tool calls, stop).

The completion formats are the ones each family's tool parser reads:

* Kimi: ``REASONING</think>CONTENT<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:I
  <|tool_call_argument_begin|>{JSON}<|tool_call_end|>...<|tool_calls_section_end|><|im_end|>``
* GLM: ``REASONING</think>CONTENT<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...
  </tool_call>`` then ``<|observation|>`` after tool calls, ``<|user|>`` after an answer.

With thinking off the prompt already ends in the empty reasoning block, so the completion starts at
the content. ``tests/models/test_chat_format.py`` checks that a completion appended to its prompt
renders the same text the template gives the whole conversation.
"""

from __future__ import annotations

import json
from typing import Any

from ember.models.tokenizer import Tokenizer
from ember.models.training.families import ChatFamily
from ember.models.training.instructions import ChatExample, Message


def _kimi_calls(calls: list[Message]) -> str:
    parts = ["<|tool_calls_section_begin|>"]
    for call in calls:
        args = json.dumps(call["function"]["arguments"], ensure_ascii=False)
        parts.append(f"<|tool_call_begin|>{call['id']}<|tool_call_argument_begin|>{args}")
        parts.append("<|tool_call_end|>")
    parts.append("<|tool_calls_section_end|>")
    return "".join(parts)


def _glm_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _glm_calls(calls: list[Message]) -> str:
    parts = []
    for call in calls:
        fn = call["function"]
        args = "".join(
            f"<arg_key>{k}</arg_key><arg_value>{_glm_value(v)}</arg_value>"
            for k, v in fn["arguments"].items()
        )
        parts.append(f"<tool_call>{fn['name']}{args}</tool_call>")
    return "".join(parts)


def completion_text(family: ChatFamily, target: Message, thinking: bool) -> str:
    """What the model emits after the generation prompt, stop token included."""
    content = target.get("content") or ""
    calls = target.get("tool_calls") or []
    reasoning = f"{target.get('reasoning_content', '')}</think>" if thinking else ""
    if family.name == "kimi":
        return reasoning + content + (_kimi_calls(calls) if calls else "") + "<|im_end|>"
    if family.name == "glm":
        stop = "<|observation|>" if calls else "<|user|>"
        return reasoning + content.strip() + (_glm_calls(calls) if calls else "") + stop
    raise ValueError(f"unknown chat family {family.name!r}")


def prompt_text(tokenizer: Tokenizer, example: ChatExample) -> str:
    return tokenizer.apply_chat_template(
        list(example.prefix),
        tools=list(example.tools) if example.tools else None,
        add_generation_prompt=True,
        enable_thinking=example.thinking,
    )


def example_text(tokenizer: Tokenizer, family: ChatFamily, example: ChatExample) -> str:
    """The whole training text of one example, document separators excluded."""
    return prompt_text(tokenizer, example) + completion_text(
        family, example.target, example.thinking
    )
