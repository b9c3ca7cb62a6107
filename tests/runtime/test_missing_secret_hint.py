"""``env.NAME`` for a secret the worker does not have says where secrets come from: on a
platform (a deployed worker), that ``.dev.vars`` is ``ember dev``'s only and ``ember secret put
NAME`` gives it one; in dev, that the project's ``.dev.vars.example`` lists the name but no
secrets file sets it. Real isolates: ``ember dev``'s deployment (built from the project) and
an ``ember serve`` version (deployed, run as the platform runs it)."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project
from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """
from workers import Response

async def on_fetch(request, env):
    try:
        return Response(env.API_KEY)
    except AttributeError as exc:
        return Response(str(exc))
"""


def test_in_dev_a_name_the_example_file_lists_is_named_with_it(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "needs-key", WORKER, "vars: {GREETING: hi}\n")
    (root / ".dev.vars.example").write_text("# copy to .dev.vars\nAPI_KEY=\n")
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        said = client.get("/").text
    assert said.startswith("env has no binding or variable named 'API_KEY'; "), said
    assert ".dev.vars.example lists API_KEY but no secrets file sets it" in said, said
    assert "`ember secret put API_KEY`" in said and "env has: GREETING" in said

    (root / ".dev.vars").write_text("API_KEY=k-123\n")  # set: the worker reads it
    again = harness.deploy(root)
    with harness.client(again) as client:
        assert client.get("/").text == "k-123"


def test_a_deployed_worker_is_told_dev_vars_stay_home(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        account_id, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            assert put_worker(api, account_id, "needs-key", WORKER).is_success
        said = serve.worker("acme", "needs-key").text
    finally:
        serve.stop()
    assert said.startswith("env has no binding or variable named 'API_KEY'"), said
    assert "read by ember dev only" in said and "`ember secret put API_KEY`" in said, said
