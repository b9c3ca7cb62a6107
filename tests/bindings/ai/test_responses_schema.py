"""gpt-oss ids answer in the Responses schema: python-workers-examples' Workers AI example
(``env.AI.run("@cf/openai/gpt-oss-120b", {"instructions", "input"})`` then ``response.output``)
runs unchanged on a real ``ember dev``; REST ``ai/run`` answers the same shape, streamed too,
and prompt/messages on the same id stay chat completions."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from ember.bindings.ai.model_schema import default_schema, schema_of
from ember.models.api.sse import parse_sse
from tests.bindings.ai.dev_support import DevServer, run_dev
from tests.bindings.ai.support import SMALL_SERVER, tiny_checkpoints

GPT_OSS = "@cf/openai/gpt-oss-120b"
# The example's handler as published (python-workers-examples 09-workers-ai; one string
# wrapped), with a length bound so the tiny model's answer ends quickly on this machine.
EXAMPLE = """
from workers import WorkerEntrypoint, Response


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        response = await self.env.AI.run(
            "@cf/openai/gpt-oss-120b",
            {
                "instructions": "You are a concise assistant.",
                "input": "What is the origin of the phrase "
                "'The King is dead, long live the King!'?",
                "max_output_tokens": 24,
            },
        )

        return Response.json(response.output)
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    glm, _ = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp("gpt-oss")
    (root / "entry.py").write_text(EXAMPLE)
    models = {GPT_OSS: {"checkpoint": str(glm), "args": SMALL_SERVER}}
    config = {"name": "python-ai", "main": "entry.py", "ai": {"binding": "AI", "models": models}}
    (root / "wrangler.jsonc").write_text(json.dumps(config))
    yield from run_dev(root)


def test_the_published_python_example_runs_unchanged(dev: DevServer) -> None:
    got = httpx.get(dev.url + "/", timeout=300)
    assert got.status_code == 200, got.text
    output = got.json()  # the Responses object's output items (24 tokens: thinking, mostly)
    assert output and {item["type"] for item in output} <= {"reasoning", "message"}
    assert all(item["status"] in ("completed", "incomplete") for item in output)


def test_rest_run_answers_a_response_object_whole_and_streamed(dev: DevServer) -> None:
    url = f"{dev.url}/client/v4/accounts/local/ai/run/{GPT_OSS}"
    ask = {"input": "hi", "max_output_tokens": 8, "reasoning": {"effort": "low"}}
    whole = httpx.post(url, json=ask, timeout=300).json()
    assert whole["success"] is True
    result = whole["result"]
    assert result["object"] == "response" and result["model"] == GPT_OSS
    assert result["usage"]["output_tokens"] <= 8
    with httpx.stream("POST", url, json={**ask, "stream": True}, timeout=300) as streamed:
        assert streamed.headers["content-type"].startswith("text/event-stream")
        events = [e for e in parse_sse(streamed.read()) if isinstance(e, dict)]
    kinds = [event["type"] for event in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] in ("response.completed", "response.incomplete")
    # prompt and messages on the same id are chat completions, as before.
    chat = httpx.post(url, json={"prompt": "hi", "max_tokens": 4}, timeout=300).json()
    assert chat["result"]["object"] == "chat.completion"


def test_a_bad_responses_input_is_a_5006_naming_the_field(dev: DevServer) -> None:
    url = f"{dev.url}/client/v4/accounts/local/ai/run/{GPT_OSS}"
    bad = httpx.post(url, json={"input": 42}, timeout=60)
    assert bad.status_code == 400
    error = bad.json()["errors"][0]
    assert error["code"] == 5006 and "input" in error["message"]


def test_the_schema_comes_from_the_id_unless_configured() -> None:
    assert default_schema(GPT_OSS) == "responses"
    assert default_schema("@cf/openai/gpt-oss-20b") == "responses"
    assert schema_of(GPT_OSS, "chat-completions") == "chat-completions"
    assert schema_of("@cf/zai-org/glm-4.7-flash", "responses") == "responses"


def test_a_batch_of_responses_inputs_is_queued_and_answered(dev: DevServer) -> None:
    url = f"{dev.url}/client/v4/accounts/local/ai/run/{GPT_OSS}"
    items = [{"input": f"hi {n}", "max_output_tokens": 6} for n in range(2)]
    queued = httpx.post(url, params={"queueRequest": "true"}, json={"requests": items}, timeout=60)
    assert queued.status_code == 200, queued.text
    request_id = queued.json()["result"]["request_id"]
    for _ in range(300):
        polled = httpx.post(url, json={"request_id": request_id}, timeout=60).json()["result"]
        if polled.get("status") not in ("queued", "running"):
            break
        time.sleep(0.2)
    assert [item["success"] for item in polled["responses"]] == [True, True], polled
    assert [item["result"]["object"] for item in polled["responses"]] == ["response"] * 2
    bad = httpx.post(url, params={"queueRequest": "true"}, json={"requests": [{"input": 5}]})
    assert bad.status_code == 400 and "/requests/0/input" in bad.json()["errors"][0]["message"]
