"""``await env.AI.models(params)``: the platform's catalog objects, filtered by ``params``.

On the platform ``models()`` returns ``AiModelsSearchObject``s (id, name, description, task,
properties) and takes the search API's parameters; ember adds what it knows of each model's
serving (architecture, context, replicas, loaded). Nothing is loaded to answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.bindings.ai.gateway import AIGateway
from ember.bindings.ai.model_search import catalog_entry
from tests.runtime.harness import Harness, write_project

WORKER = """
import json
from workers import Response

async def on_fetch(request, env):
    params = json.loads(await request.text() or "null")
    try:
        rows = await env.AI.models(params)
    except Exception as error:
        return Response.json({"type": type(error).__name__, "message": str(error)})
    return Response.json([{"id": r.id, "name": r.name, "task": r.task.name,
                           "loaded": r.loaded, "architecture": r.architecture} for r in rows])
"""


@pytest.fixture
def client(tmp_path: Path) -> Iterator:  # noqa: ANN201
    harness = Harness(tmp_path / "state")
    try:
        root = write_project(tmp_path / "project", WORKER, "ai:\n  binding: AI\n")
        with harness.client(harness.deploy(root)) as client:
            yield client
    finally:
        harness.close()


def test_models_takes_the_search_parameters(client) -> None:  # noqa: ANN001
    every = client.post("/", content="null").json()
    assert len(every) == 7 and all(r["task"] == "Text Generation" for r in every)
    assert all(r["name"] == r["id"] and r["loaded"] is False for r in every)
    kimi = client.post("/", json={"search": "kimi"}).json()
    assert [r["id"] for r in kimi] == [r["id"] for r in every if "kimi" in r["id"]]
    glm = client.post("/", json={"author": "zai-org", "per_page": 2, "page": 1}).json()
    assert [r["id"] for r in glm] == [r["id"] for r in every if "zai-org" in r["id"]][:2]
    assert client.post("/", json={"hide_experimental": True}).json() == every
    bad = client.post("/", json={"per_page": 0}).json()
    assert bad["type"] == "InferenceUpstreamError" and "per_page" in bad["message"]


def test_search_lists_only_the_capabilities_an_id_has() -> None:
    def flags(row: dict) -> set[str]:
        return {p["property_id"] for p in catalog_entry(row)["properties"]} - {"context_window"}

    async def rows() -> dict[str, dict]:
        gateway = AIGateway(progress=lambda line: None)
        try:
            return {row["id"]: row for row in gateway.models()}
        finally:
            await gateway.aclose()

    listed = asyncio.run(rows())
    # The platform's catalog file (cloudflare-docs workers-ai-models/glm-5.3-flash.json)
    # lists function calling for GLM-5.3-Flash.
    assert flags(listed["@cf/zai-org/glm-5.3-flash"]) == {
        "function_calling",
        "reasoning",
        "vision",
    }
    assert flags(listed["@cf/moonshotai/kimi-k2.5"]) == {"function_calling", "reasoning", "vision"}
    assert flags(listed["@cf/zai-org/glm-4.7-flash"]) == {"function_calling", "reasoning"}


def test_rows_say_what_ember_serves_beside_the_platforms_flags() -> None:
    """The platform's vision flag stays (fidelity); ember's own fields say the local
    checkpoint is a tiny text-only model, in the rows and in the search objects."""

    async def rows() -> dict[str, dict]:
        gateway = AIGateway(progress=lambda line: None)
        try:
            return {row["id"]: row for row in gateway.models()}
        finally:
            await gateway.aclose()

    listed = asyncio.run(rows())
    kimi = listed["@cf/moonshotai/kimi-k2.6"]
    assert kimi["vision"] is True  # the platform model reads images
    assert kimi["ember"] == {
        "checkpoint": "kimi-tiny",
        "shipped": True,
        "vision": False,
        "function_calling": True,
        "reasoning": True,
        "schema": "chat-completions",  # what env.AI.run answers: a chat.completion
    }
    searched = catalog_entry(listed["@cf/zai-org/glm-5.3-flash"])
    assert searched["ember"]["vision"] is False and searched["ember"]["checkpoint"] == "glmdsa-tiny"
    assert "~10M-parameter checkpoint glmdsa-tiny (text only)" in searched["description"]
