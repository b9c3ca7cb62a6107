"""A configured checkpoint that cannot be read fails AI calls with InferenceUpstreamError.

``ai.models.<id>.checkpoint`` may point at a directory that has no config.json (a typo, a
checkpoint still being copied). The pool reads it when the AI service first starts; that must
reach the handler as the platform's error naming the file, and leave the isolate running
(calls that need no model keep working), not crash the worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from ember.bindings.ai.gateway import AIGateway
from ember.bindings.ai.spec import gateway_config
from tests.bindings.ai.support import GLM, KIMI, RestServer
from tests.runtime.harness import Harness, write_project

WORKER = """
from workers import Response

async def on_fetch(request, env):
    if request.url.endswith("/plain"):
        return Response("still here")
    try:
        await env.AI.run("@cf/zai-org/glm-4.7-flash", {"prompt": "hi", "max_tokens": 2})
    except Exception as error:
        return Response.json({"type": type(error).__name__, "message": str(error),
                              "code": getattr(error, "code", None)})
    return Response("answered")
"""


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path / "state")
    try:
        yield harness
    finally:
        harness.close()


def test_a_checkpoint_without_config_json_is_an_inference_error(
    harness: Harness, tmp_path: Path
) -> None:
    empty = tmp_path / "not-a-checkpoint"
    empty.mkdir()
    section = {"binding": "AI", "models": {KIMI: {"checkpoint": str(empty)}}}
    root = write_project(tmp_path / "project", WORKER, yaml.safe_dump({"ai": section}))
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        for _ in range(2):  # the same answer again: nothing was left half made
            failed = client.post("/").json()
            assert failed["type"] == "InferenceUpstreamError", failed
            assert str(empty / "config.json") in failed["message"]
            assert KIMI in failed["message"]
        plain = client.get("/plain")
        assert plain.status_code == 200 and plain.text == "still here"


def test_the_rest_and_openai_routes_answer_the_same_error(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-checkpoint"
    empty.mkdir()
    section = {"binding": "AI", "models": {KIMI: {"checkpoint": str(empty)}}}
    config = gateway_config(section, str(tmp_path / "ember.yaml"))
    with RestServer(lambda: AIGateway(config, progress=lambda line: None)) as server:
        rest = httpx.post(
            f"{server.url}/client/v4/accounts/a/ai/run/{GLM}", json={"prompt": "hi"}, timeout=30
        )
        body = rest.json()
        assert rest.status_code == 503 and body["success"] is False, body
        assert str(empty / "config.json") in body["errors"][0]["message"]
        chat = httpx.post(
            f"{server.url}/ai/v1/chat/completions",
            json={"model": GLM, "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert chat.status_code == 503
        assert str(empty / "config.json") in chat.json()["error"]["message"]
        listed = httpx.get(f"{server.url}/ai/v1/models", timeout=30)
        assert listed.status_code == 503
        assert str(empty / "config.json") in listed.json()["error"]["message"]
