"""``n`` choices through the runtime: ``env.AI.run`` in a worker served by a real ``ember dev``
(whole and streamed, in the platform's event format), the REST ``ai/run`` envelope and
``/ai/v1/chat/completions`` with the official ``openai`` client; the gateway forwards ``n`` and
each streamed chunk keeps its choice's ``index``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from ember.bindings.ai.json_mode import json_mode_miss
from ember.models.api.sse import parse_sse
from tests.bindings.ai.dev_support import DevServer, serve_ai_project
from tests.bindings.ai.support import GLM

WORKER = """
from workers import Response

GLM = "@cf/zai-org/glm-4.7-flash"
INPUTS = {
    "messages": [{"role": "user", "content": "Name a Python module."}],
    "n": 3,
    "max_tokens": 6,
    "seed": 9,
    "chat_template_kwargs": {"enable_thinking": False},
}


async def on_fetch(request, env):
    if request.url.endswith("/stream"):
        stream = await env.AI.run(GLM, {**INPUTS, "stream": True})
        return Response(stream, headers={"content-type": "text/event-stream"})
    return Response.json(await env.AI.run(GLM, INPUTS))
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    yield from serve_ai_project(tmp_path_factory, "dev-choices", WORKER)


def test_env_ai_run_returns_n_choices(dev: DevServer) -> None:
    result = httpx.get(dev.url + "/", timeout=180).json()
    assert [c["index"] for c in result["choices"]] == [0, 1, 2]
    assert all(c["message"]["role"] == "assistant" for c in result["choices"])
    assert len({c["message"]["content"] for c in result["choices"]}) > 1  # seeds seed + i
    assert result["usage"]["completion_tokens"] <= 18
    again = httpx.get(dev.url + "/", timeout=180).json()
    assert [c["message"] for c in again["choices"]] == [c["message"] for c in result["choices"]]


def test_env_ai_run_streams_every_choice_with_its_index(dev: DevServer) -> None:
    events = parse_sse(httpx.get(dev.url + "/stream", timeout=180).content)
    assert events[-1] == "[DONE]"
    *chunks, usage = events[:-1]
    assert set(usage) == {"response", "usage"}  # the platform's last event, once
    ends = [c["choices"][0]["index"] for c in chunks if c["choices"][0]["finish_reason"]]  # type: ignore[index]
    assert sorted(ends) == [0, 1, 2]
    assert usage["usage"]["completion_tokens"] <= 18  # type: ignore[index]


def test_rest_run_and_the_openai_route_forward_n(dev: DevServer) -> None:
    body = {"prompt": "Hello", "max_tokens": 3, "n": 2, "seed": 1}
    answer = httpx.post(f"{dev.url}/client/v4/accounts/a/ai/run/{GLM}", json=body, timeout=180)
    envelope = answer.json()
    assert answer.status_code == 200 and envelope["success"] is True
    assert [c["index"] for c in envelope["result"]["choices"]] == [0, 1]
    client = openai.OpenAI(base_url=dev.url + "/ai/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=GLM, messages=[{"role": "user", "content": "Hi"}], n=3, max_tokens=3, temperature=0
    )
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert len({c.message.content for c in reply.choices}) == 1  # greedy: equal choices
    chunks = list(
        client.chat.completions.create(
            model=GLM,
            messages=[{"role": "user", "content": "Hi"}],
            n=2,
            max_tokens=3,
            stream=True,
        )
    )
    ends = [c.choices[0].index for c in chunks if c.choices and c.choices[0].finish_reason]
    assert sorted(ends) == [0, 1]


def test_json_mode_judges_every_choice() -> None:
    inputs = {"response_format": {"type": "json_object"}}
    good = {"message": {"content": '{"a": 1}'}, "finish_reason": "stop"}
    bad = {"message": {"content": "not json"}, "finish_reason": "stop"}
    assert json_mode_miss({"choices": [good, good]}, inputs) is None
    assert json_mode_miss({"choices": [good, bad]}, inputs) == (
        "choice 1: the answer's content is not valid JSON"
    )
    assert json_mode_miss({"choices": [bad]}, inputs) == "the answer's content is not valid JSON"
