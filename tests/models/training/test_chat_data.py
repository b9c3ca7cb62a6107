"""Instruction pairs and tool conversations: deterministic, grounded in the corpus, and rendered
so that what the model learns to emit is exactly what the template shows in history."""

from __future__ import annotations

import ast
import dataclasses
import json
import re

import pytest

from ember.models.training.chat_format import completion_text, prompt_text
from ember.models.training.corpus import load_heldout
from ember.models.training.families import FAMILIES
from ember.models.training.functions import documented_functions
from ember.models.training.instructions import ChatExample, instruction_examples
from ember.models.training.pipeline import HELDOUT
from ember.models.training.tool_examples import tool_examples
from tests.models.chat_fixtures import family_tokenizer

SEED = 0


@pytest.fixture(scope="module")
def files():
    return load_heldout(HELDOUT)  # any corpus files will do; these are committed and stable


@pytest.fixture(scope="module")
def functions(files):
    return [fn for f in files for fn in documented_functions(f)]


@pytest.fixture(scope="module")
def examples(files, functions) -> list[ChatExample]:
    return instruction_examples(functions, SEED) + tool_examples(files, functions, SEED)


def test_examples_are_deterministic_and_order_independent(files, functions, examples) -> None:
    assert instruction_examples(functions, SEED) + tool_examples(files, functions, SEED) == examples
    reversed_pairs = instruction_examples(functions[::-1], SEED)[::-1]
    assert reversed_pairs == instruction_examples(functions, SEED)


def test_answers_are_python(functions) -> None:
    for ex in instruction_examples(functions, SEED):
        code = re.search(r"```python\n(.*)\n```", ex.target["content"], re.S)
        assert code is not None
        ast.parse(code.group(1))
        assert ex.prefix[-1]["role"] == "user" and ex.prefix[-1]["content"]


def test_tool_conversations_are_true_to_the_corpus(functions, examples) -> None:
    sources = {(fn.module, fn.qualname): fn.source for fn in functions}
    checked = 0
    for ex in examples:
        calls = [c for m in ex.prefix for c in m.get("tool_calls", [])]
        results = [m["content"] for m in ex.prefix if m["role"] == "tool"]
        for call, result in zip(calls, results, strict=True):
            if call["function"]["name"] == "get_source":
                args = call["function"]["arguments"]
                assert sources[args["module"], args["name"]] == result
                checked += 1
        if calls:
            offered = {t["function"]["name"] for t in ex.tools or ()}
            assert {c["function"]["name"] for c in calls} <= offered
    assert checked > 5


def _full(tok, ex: ChatExample, target) -> str:
    return tok.apply_chat_template(
        [*ex.prefix, target],
        tools=list(ex.tools) if ex.tools else None,
        add_generation_prompt=False,
        enable_thinking=ex.thinking,
    )


ASSISTANT_HEADER = {"kimi": "<|im_assistant|>", "glm": "<|assistant|>"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_completion_is_how_the_template_shows_the_reply_in_history(family: str, examples) -> None:
    """Prompt + completion reads as the whole conversation does once the reply is history.

    Without earlier assistant turns the two are the same string. With them (tool calls), Kimi
    K2.5 blanks their reasoning once a plain reply follows, so only the reply must match.
    """
    tok, fam = family_tokenizer(family), FAMILIES[family]
    for ex in examples[::7]:
        for thinking in (False, True):
            if thinking and (family == "kimi" or "reasoning_content" not in ex.target):
                continue  # K2.5 blanks a last plain reply's reasoning; GLM shows none as </think>
            target = ex.target if thinking else {**ex.target, "reasoning_content": None}
            ex2 = dataclasses.replace(ex, thinking=thinking, target=target)
            prompt = prompt_text(tok, ex2)
            completion = completion_text(fam, ex2.target, thinking)
            if family == "glm":
                completion = completion.removesuffix("<|user|>")
            full = _full(tok, ex2, ex2.target)
            if not any(m["role"] == "assistant" for m in ex2.prefix):
                assert full == prompt + completion
            header = prompt[prompt.rindex(ASSISTANT_HEADER[family]) :]
            assert full.endswith(header + completion)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_tool_call_turns_in_history_read_as_the_model_emits_them(family: str, examples) -> None:
    tok, fam = family_tokenizer(family), FAMILIES[family]
    seen = 0
    for ex in examples:
        call_at = next((i for i, m in enumerate(ex.prefix) if m.get("tool_calls")), None)
        if call_at is None:
            continue
        head = dataclasses.replace(ex, prefix=ex.prefix[:call_at])
        emitted = prompt_text(tok, head) + completion_text(fam, ex.prefix[call_at], ex.thinking)
        assert prompt_text(tok, ex).startswith(emitted)
        seen += 1
    assert seen > 10


def test_kimi_tool_call_arguments_are_json() -> None:
    call = {
        "id": "functions.f:0",
        "type": "function",
        "function": {"name": "f", "arguments": {"a": "ü", "n": 2}},
    }
    text = completion_text(FAMILIES["kimi"], {"content": "", "tool_calls": [call]}, False)
    args = text.split("<|tool_call_argument_begin|>")[1].split("<|tool_call_end|>")[0]
    assert json.loads(args) == {"a": "ü", "n": 2}
    assert text.endswith("<|tool_calls_section_end|><|im_end|>")
