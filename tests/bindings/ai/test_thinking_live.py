"""Thinking through the real gateway and a real GLM model server (the shipped tiny checkpoint):
the README's small-budget call, the spellings that turn thinking off, the notes the dev
console gets when thinking ate the answer or a field that does nothing was sent, and the 5006
for an image sent to an id whose platform model reads images."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.bindings.ai.gateway import AIGateway, AIRequestFailed
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.spec import gateway_config
from ember.bindings.ai.tenant import Tenant
from ember.models.api.sse import parse_sse
from tests.bindings.ai.support import GLM, KIMI, LoopThread, models_section, tiny_checkpoints

PROMPT = "What is the origin of the phrase Hello, World?"
# Greedy, so "thinks" is the same answer every run (sampled, a tiny model may close its
# thinking at once).
GREEDY = {"prompt": PROMPT, "max_completion_tokens": 20, "temperature": 0}
KIMI_CODE = "@cf/moonshotai/kimi-k2.7-code"  # reasoning mandatory in the platform's catalog


class Live:
    def __init__(self, gateway: AIGateway, loop: LoopThread, notes: list[str]) -> None:
        self.gateway, self.loop, self.notes = gateway, loop, notes

    def run(self, model: str, inputs: dict[str, Any], dialect: str = "workers") -> dict:
        self.notes.clear()
        answer = self.loop.run(
            self.gateway.run(Tenant.alone("t"), model, inputs, RunOptions(), dialect)
        )  # type: ignore[arg-type]
        return json.loads(answer.body or b"{}")

    def stream(self, model: str, inputs: dict[str, Any], dialect: str = "workers") -> list[object]:
        self.notes.clear()

        async def read() -> bytes:
            streamed = {**inputs, "stream": True}
            answer = await self.gateway.run(
                Tenant.alone("t"), model, streamed, RunOptions(), dialect
            )  # type: ignore[arg-type]
            assert answer.stream is not None
            return b"".join([chunk async for chunk in answer.stream])

        return parse_sse(self.loop.run(read()))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    glm, kimi = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("thinking")
    models = models_section(glm, kimi)
    models[KIMI_CODE] = {**models[KIMI], "checkpoint": str(kimi)}
    section = {"binding": "AI", "models": models}
    notes: list[str] = []
    loop = LoopThread()
    gateway = loop.run(_make(gateway_config(section, str(Path(root) / "ember.yaml")), notes))
    try:
        # Loaded first: the tests that expect no note at all would otherwise see the replica's
        # loading lines whenever one of them is the first to run in its process (xdist).
        assert loop.run(gateway.pool.wait_ready(GLM, 120), timeout=130), notes
        yield Live(gateway, loop, notes)
    finally:
        loop.run(gateway.aclose())
        loop.close()


async def _make(config: Any, notes: list[str]) -> AIGateway:
    return AIGateway(config, progress=notes.append)


def _reasoning_tokens(body: dict) -> int:
    return body["usage"]["completion_tokens_details"]["reasoning_tokens"]


def test_a_small_budget_spent_thinking_gets_a_note_naming_the_fix(live: Live) -> None:
    body = live.run(GLM, GREEDY)
    choice = body["choices"][0]
    # The platform's (and vLLM's) answer is kept: content null, the reasoning beside it.
    assert choice["finish_reason"] == "length" and choice["message"]["content"] is None
    assert choice["message"]["reasoning_content"]
    (note,) = [n for n in live.notes if "content is null" in n]
    assert "max_completion_tokens=20" in note
    assert '"chat_template_kwargs": {"enable_thinking": false}' in note


@pytest.mark.parametrize("dialect", ["workers", "openai"])
def test_a_streamed_answer_spent_thinking_gets_the_same_note(live: Live, dialect: str) -> None:
    inputs = {**GREEDY}
    if dialect == "openai":
        inputs = {**GREEDY, "messages": [{"role": "user", "content": inputs.pop("prompt")}]}
    events = live.stream(GLM, inputs, dialect)
    chunks = [e for e in events if isinstance(e, dict) and e.get("choices")]
    deltas = [c["choices"][0].get("delta") or {} for c in chunks]
    # The case under test: the budget ran out inside the reasoning, no content streamed.
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert any(d.get("reasoning_content") for d in deltas)
    assert not any(d.get("content") for d in deltas)
    (note,) = [n for n in live.notes if "content is null" in n]
    assert "max_completion_tokens=20" in note
    assert '"chat_template_kwargs": {"enable_thinking": false}' in note


@pytest.mark.parametrize(
    "off",
    [
        {"chat_template_kwargs": {"enable_thinking": False}},
        {"reasoning_effort": "none"},
    ],
    ids=["chat_template_kwargs", "reasoning_effort_none"],
)
@pytest.mark.parametrize("dialect", ["workers", "openai"])
def test_thinking_off_leaves_the_whole_budget_to_the_answer(
    live: Live, off: dict, dialect: str
) -> None:
    inputs = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_completion_tokens": 20,
        "temperature": 0,
    }
    if dialect == "openai":
        inputs["model"] = GLM
    body = live.run(GLM, {**inputs, **off}, dialect)
    message = body["choices"][0]["message"]
    assert _reasoning_tokens(body) == 0 and not message.get("reasoning_content"), body
    assert message["content"], body
    assert not live.notes


def test_an_explicit_enable_thinking_wins_over_reasoning_effort(live: Live) -> None:
    body = live.run(
        GLM,
        {**GREEDY, "reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}},
    )
    assert _reasoning_tokens(body) > 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("thinking", {"type": "disabled"}),
        ("reasoning", {"enabled": False}),
        ("enable_thinking", False),
    ],
)
def test_other_apis_spellings_are_ignored_as_on_the_platform_with_a_note(
    live: Live, field: str, value: object
) -> None:
    body = live.run(GLM, {**GREEDY, field: value})
    assert _reasoning_tokens(body) > 0  # ignored, as Workers AI ignores it
    (note,) = [n for n in live.notes if "ignored" in n]
    assert f"'{field}'" in note and "Workers AI ignores it too" in note
    assert '"chat_template_kwargs": {"enable_thinking": false}' in note


def test_an_image_for_a_vision_id_says_the_local_checkpoint_reads_text_only(live: Live) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    inputs = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, image]}]}
    with pytest.raises(AIRequestFailed) as refused:
        live.run(KIMI, inputs)
    failure = refused.value.failure
    assert failure.code.code == 5006
    assert "/messages/0/content/1/type" in failure.message
    assert (
        "ember's local checkpoint for @cf/moonshotai/kimi-k2.5 reads text only" in failure.message
    )
    assert "the platform model accepts images" in failure.message
    with pytest.raises(AIRequestFailed) as text_only:  # GLM-4.7-Flash reads text on both
        live.run(GLM, inputs)
    assert "platform" not in text_only.value.failure.message


def test_json_mode_cut_short_with_thinking_off_suggests_bounding_the_schema(live: Live) -> None:
    """Thinking already off: the JSON itself ran long, so the hint is about the JSON (the
    tiny models write strings until something stops them), never "disable thinking"."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
        "required": ["name", "city"],
    }
    inputs = {
        "prompt": "Extract the person: Ada Lovelace lives in London.",
        "max_completion_tokens": 6,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
        "chat_template_kwargs": {"enable_thinking": False},
        "temperature": 0,
    }
    with pytest.raises(AIRequestFailed) as whole:
        live.run(GLM, inputs)
    streamed = live.stream(GLM, inputs)[-2]
    assert isinstance(streamed, dict)
    for message in (whole.value.failure.description, streamed["errors"][0]["message"]):
        assert message.startswith("JSON Mode couldn't be met"), message
        assert "thinking" not in message, message
        assert "max_completion_tokens=6" in message and "raise max_completion_tokens" in message
        assert "maxLength and maxItems" in message


def test_reasoning_effort_none_keeps_thinking_where_the_platform_makes_it_mandatory(
    live: Live,
) -> None:
    """K2.7 Code always thinks on the platform: "none" is its default effort there. The
    prompt shows it (a tiny Kimi may close its thinking at once, so the answer cannot): the
    template writes thinking-on and thinking-off prompts differently."""

    def prompt_tokens(model: str, extra: dict) -> int:
        return live.run(model, {**GREEDY, **extra})["usage"]["prompt_tokens"]

    off = {"chat_template_kwargs": {"enable_thinking": False}}
    none = {"reasoning_effort": "none"}
    assert prompt_tokens(KIMI, none) == prompt_tokens(KIMI, off) != prompt_tokens(KIMI, {})
    assert prompt_tokens(KIMI_CODE, none) == prompt_tokens(KIMI_CODE, {})
    live.run(KIMI_CODE, {**GREEDY, **none})
    (note,) = [n for n in live.notes if "always thinks" in n]
    assert KIMI_CODE in note and "reasoning_effort" in note


def test_a_misspelled_field_is_ignored_with_a_note_naming_the_field_meant(live: Live) -> None:
    body = live.run(GLM, {**GREEDY, "max_token": 3, "tempreature": 0.5})
    # Ignored, as the platform ignores unknown fields: the budget is still max_completion_tokens.
    assert body["usage"]["completion_tokens"] == 20
    (note,) = [n for n in live.notes if "not a field" in n]
    assert "'max_token' (did you mean 'max_tokens'?)" in note
    assert "'tempreature' (did you mean 'temperature'?)" in note


def test_fields_that_work_or_that_the_platform_accepts_get_no_note(live: Live) -> None:
    inputs = {
        **GREEDY,
        "top_p": 0.9,
        "seed": 7,
        "n": 1,
        "logprobs": False,
        "store": False,
        "metadata": {"k": "v"},
        "chat_template_kwargs": {"enable_thinking": True},
    }
    live.run(GLM, inputs)
    assert not [n for n in live.notes if "not a field" in n]
