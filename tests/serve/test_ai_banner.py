"""A bare ``ember serve`` serves no model, and says so at start with the config that serves one;
a worker's ``env.AI.run`` of a catalog id then gets a 5007 with that same minimal config (not
a checkpoint it does not need); started with that config, the id is served."""

from __future__ import annotations

import time
from pathlib import Path

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account, put_worker

GLM = "@cf/zai-org/glm-4.7-flash"
MINIMAL = f'ai: {{models: {{"{GLM}": {{}}}}}}'
WORKER = f"""\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.AI.run("{GLM}", {{"prompt": "hi", "max_tokens": 2}})
        return Response("answered")
    except Exception as exc:
        return Response(str(exc))
"""


def _banner(serve: ServeProcess) -> str:
    """The start banner, once its AI line is out (the port file may come first)."""
    deadline = time.monotonic() + 60
    while "AI models:" not in serve.output() and time.monotonic() < deadline:
        time.sleep(0.05)
    return serve.output()


def test_a_bare_serve_says_it_serves_no_model_and_how_to_add_one(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        banner = _banner(serve)
        assert "AI models: none" in banner, banner
        assert f"to serve one, add {MINIMAL} to {serve.config}" in banner, banner

        account_id, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            bindings = [{"name": "AI", "type": "ai"}]
            assert put_worker(api, account_id, "asker", WORKER, bindings=bindings).is_success
        said = serve.worker("acme", "asker").text
        assert "5007" in said and f"No such model {GLM} or task" in said, said
        assert MINIMAL in said and "checkpoint" not in said, said

        # `ember ai models --url` there: not a header-only table but why, and what to do.
        listed = serve.ember(token, tmp_path, "ai", "models", "--url", serve.url)
        assert listed.returncode == 0, listed.stderr
        assert not listed.stdout.startswith("ID"), listed.stdout
        assert f"No AI models are served at {serve.url}" in listed.stdout, listed.stdout
        assert "answers 5007" in listed.stdout and "ai: {models: {ID: {}}}" in listed.stdout
    finally:
        serve.stop()


def test_the_minimal_config_serves_the_catalog_id(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG + MINIMAL + "\n")
    try:
        banner = _banner(serve)
        assert f"AI models: {GLM}\n" in banner, banner
        account_id, token = permanent_account(serve, "acme")
        with serve.api(token) as api:  # the listing starts no replica
            found = api.get(f"/accounts/{account_id}/ai/models/search").json()["result"]
        assert [row["name"] for row in found] == [GLM]
    finally:
        serve.stop()
