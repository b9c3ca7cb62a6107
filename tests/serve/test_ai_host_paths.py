"""ember serve never shows a tenant where the operator keeps its checkpoints.

The operator maps a model id to a checkpoint directory of its own (``ai.models."<id>".checkpoint:
/srv/...``); a tenant reading the catalog (``ai/models/search`` as wrangler and the cloudflare SDK
read it, ``/ai/v1/models``, a worker's ``env.AI.models()``) or an error (a context-length
refusal names the local checkpoint) learned that host path. Tenants see the checkpoint's
directory name instead; ``ember dev`` (the user's own machine) still shows the path
(tests/bindings/ai/test_catalog_rest.py, test_models_binding.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import (
    BASE_CONFIG,
    TINY_GLM,
    ServeProcess,
    permanent_account,
    put_worker,
)

MODEL = "@cf/zai-org/glm-4.7-flash"
SECRET = "operator-only-3f9a"  # a directory name only the operator's config holds
WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response.json(await env.AI.models())
"""


@dataclass(frozen=True)
class Scene:
    serve: ServeProcess
    root: Path
    account: str
    token: str


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    root = tmp_path_factory.mktemp("host-paths")
    checkpoint = root / SECRET / "glm-flash-local"
    shutil.copytree(TINY_GLM, checkpoint)
    config = (
        BASE_CONFIG
        + f"""\
ai:
  models:
    "{MODEL}":
      checkpoint: {checkpoint}
      args: ["--torch-threads", "1", "--kv-cache-bytes", "16MiB"]
"""
    )
    serve = ServeProcess(root / "state", config)
    try:
        account, token = permanent_account(serve, "tenant")
        with serve.api(token) as api:
            put = put_worker(
                api, account, "lister", WORKER, bindings=[{"name": "AI", "type": "ai"}]
            )
            assert put.status_code == 200, put.text
        yield Scene(serve, root, account, token)
    finally:
        serve.stop()


def _hidden(scene: Scene, text: str) -> None:
    assert SECRET not in text and str(scene.root) not in text, text
    assert str(TINY_GLM.parent) not in text, text  # nor where ember itself is installed


def test_the_catalog_names_the_checkpoint_not_its_path(scene: Scene) -> None:
    with scene.serve.api(scene.token) as api:
        search = api.get(f"/accounts/{scene.account}/ai/models/search")
        schema = api.get(f"/accounts/{scene.account}/ai/models/schema", params={"model": MODEL})
        authors = api.get(f"/accounts/{scene.account}/ai/authors/search")
        rest_models = api.get(f"/accounts/{scene.account}/ai/v1/models")
    bearer = {"authorization": f"Bearer {scene.token}"}
    models = httpx.get(scene.serve.url + "/ai/v1/models", headers=bearer, timeout=60)
    one = httpx.get(scene.serve.url + f"/ai/v1/models/{MODEL}", headers=bearer, timeout=60)
    listed = scene.serve.worker("tenant", "lister")
    for reply in (search, schema, authors, rest_models, models, one, listed):
        assert reply.status_code == 200, reply.text
        _hidden(scene, reply.text)
    (entry,) = [e for e in search.json()["result"] if e["id"] == MODEL]
    assert entry["ember"]["checkpoint"] == "glm-flash-local"
    assert "from the checkpoint glm-flash-local (text only)" in entry["description"]
    (card,) = [c for c in models.json()["data"] if c["id"] == MODEL]
    assert card["ember"]["checkpoint"] == "glm-flash-local"


def test_a_context_refusal_names_the_checkpoint_not_its_path(scene: Scene) -> None:
    ask = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 100_000}
    bearer = {"authorization": f"Bearer {scene.token}"}
    refused = httpx.post(
        f"{scene.serve.url}/client/v4/accounts/{scene.account}/ai/run/{MODEL}",
        json=ask,
        headers=bearer,
        timeout=300,
    )
    assert refused.status_code == 400, refused.text
    message = refused.json()["errors"][0]["message"]
    assert "limit of the local checkpoint" in message and "glm-flash-local" in message
    _hidden(scene, refused.text)
