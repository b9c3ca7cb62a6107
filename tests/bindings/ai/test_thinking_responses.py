"""The dev console's note when thinking used up a Responses request's whole budget names the
Responses API's fields (``max_output_tokens``, ``reasoning.effort``, the reasoning item), not
chat's (``max_tokens=N``, ``reasoning_content``, ``chat_template_kwargs``): the request goes
through the gateway as a chat request, but its caller wrote a Responses one. On
``/ai/v1/responses`` (``responses_front``) and on ``env.AI.run`` with ``input`` for a gpt-oss id
(the Responses schema), plain and streamed, through a real GLM model server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.bindings.ai.gateway import AIGateway
from ember.bindings.ai.options import RunOptions
from ember.bindings.ai.responses_front import create_response
from ember.bindings.ai.spec import gateway_config
from ember.bindings.ai.tenant import Tenant
from tests.bindings.ai.support import GLM, LoopThread, models_section, tiny_checkpoints

GPT_OSS = "@cf/openai/gpt-oss-20b"  # answers an ``input`` in the Responses schema
# Greedy, so the tiny model thinks past the budget every run.
ASK = {"input": "What is the origin of the phrase Hello, World?", "max_output_tokens": 20,
       "temperature": 0}  # fmt: skip


class Live:
    def __init__(self, gateway: AIGateway, loop: LoopThread, notes: list[str]) -> None:
        self.gateway, self.loop, self.notes = gateway, loop, notes

    def ask(self, front: str, stream: bool) -> dict[str, Any]:
        """The final response object; ``front``: "v1" (/ai/v1/responses) or "run" (env.AI.run)."""
        self.notes.clear()
        tenant = Tenant.alone("t")

        async def call() -> dict[str, Any]:
            if front == "v1":
                body = {**ASK, "model": GLM, "stream": stream}
                answer = await create_response(self.gateway, tenant, body, RunOptions())
            else:
                body = {**ASK, "stream": stream}
                answer = await self.gateway.run(tenant, GPT_OSS, body, RunOptions())
            if answer.stream is None:
                return json.loads(answer.body or b"{}")  # type: ignore[no-any-return]
            text = b"".join([chunk async for chunk in answer.stream]).decode()
            data = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
            return json.loads(data[-1])["response"]  # type: ignore[no-any-return]

        return self.loop.run(call())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    glm, kimi = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("thinking-responses")
    models = models_section(glm, kimi)
    models[GPT_OSS] = {**models[GLM], "checkpoint": str(glm)}
    section = {"binding": "AI", "models": models}
    notes: list[str] = []
    loop = LoopThread()
    config = gateway_config(section, str(Path(root) / "ember.yaml"))
    gateway = loop.run(_make(config, notes))
    try:
        yield Live(gateway, loop, notes)
    finally:
        loop.run(gateway.aclose())
        loop.close()


async def _make(config: Any, notes: list[str]) -> AIGateway:
    return AIGateway(config, progress=notes.append)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("front", ["v1", "run"])
def test_a_budget_spent_thinking_gets_a_note_in_the_responses_apis_words(
    live: Live, front: str, stream: bool
) -> None:
    response = live.ask(front, stream)
    # The case under test: the budget ran out inside the reasoning, no message item.
    assert response["status"] == "incomplete", response
    assert [item["type"] for item in response["output"]] == ["reasoning"]
    notes = [n for n in live.notes if "spent all of" in n]
    assert len(notes) == 1, live.notes
    note = notes[0]
    assert "max_output_tokens=20" in note and "raise max_output_tokens" in note
    assert '"reasoning": {"effort": "none"}' in note and "reasoning item" in note
    for chat_word in ("max_tokens=", "reasoning_content", "chat_template_kwargs", "content is"):
        assert chat_word not in note, note
