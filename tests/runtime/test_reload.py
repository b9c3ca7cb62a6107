"""Replacing a deployment: start the new isolate, switch, drain the old; bad code shows why."""

from __future__ import annotations

import dataclasses
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ember.runtime.process import State
from tests.runtime.harness import Harness, write_project

V1 = """
import asyncio
from workers import Response

async def fetch(request, env, ctx):
    if request.headers.get("x-kind") == "slow":
        await asyncio.sleep(0.6)
        return Response("v1 slow")
    return Response("v1")
"""


def _redeploy(harness: Harness, root: Path, deployment_id: str) -> object:
    deployment = dataclasses.replace(harness.deployment(root), id=deployment_id)
    return harness.run(harness.supervisor.deploy(deployment))


def test_replacing_keeps_in_flight_requests_on_the_old_code(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "reload", V1)
    deployment_id = harness.deploy(root)
    old = harness.supervisor.isolate(deployment_id)
    with ThreadPoolExecutor(1) as pool, harness.client(deployment_id) as client:
        assert client.get("/").text == "v1"
        slow = pool.submit(client.get, "/", headers={"x-kind": "slow"})
        harness.wait_for(lambda: old is not None and len(old.inflight) == 1)
        (root / "worker.py").write_text(V1.replace('"v1"', '"v2"'))
        assert _redeploy(harness, root, deployment_id) is None
        assert client.get("/").text == "v2"  # new requests go to the new isolate at once
        assert slow.result().text == "v1 slow"  # the in-flight one finished on the old code
    assert old is not None
    harness.wait_for(lambda: old.state is State.DEAD)  # drained, then closed


def test_syntax_error_shows_file_and_line_and_fixing_it_fixes_the_next_request(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "broken", V1)
    deployment_id = harness.deploy(root)
    broken = textwrap.dedent(
        """
        from workers import Response

        async def fetch(request, env, ctx)
            return Response("never")
        """
    )
    (root / "worker.py").write_text(broken)
    error = _redeploy(harness, root, deployment_id)
    assert error is not None
    with harness.client(deployment_id) as client:
        page = client.get("/")
        assert page.status_code == 500
        assert "SyntaxError" in page.text
        assert f'File "{root / "worker.py"}", line 4' in page.text
        (root / "worker.py").write_text(V1)
        assert _redeploy(harness, root, deployment_id) is None
        assert client.get("/").text == "v1"


def test_exception_at_import_and_missing_handler_are_clear(
    harness: Harness, tmp_path: Path
) -> None:
    raising = write_project(
        tmp_path / "raising", "import json\nraise RuntimeError('config missing')\n"
    )
    empty = write_project(tmp_path / "empty", "VALUE = 1\n")
    with harness.client(harness.deploy(raising)) as client:
        page = client.get("/").text
    assert "RuntimeError: config missing" in page and 'worker.py", line 2' in page
    with harness.client(harness.deploy(empty)) as client:
        response = client.get("/")
    assert response.status_code == 500
    assert (
        "defines no handler" in response.text and "class Default(WorkerEntrypoint)" in response.text
    )


def test_sibling_modules_reload_even_with_same_size_and_second(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(
        tmp_path / "sibling",
        """
        import sys
        from helper import VALUE
        from workers import Response

        async def fetch(request, env, ctx):
            names = {"torch", "httpx", "uvicorn"}
            heavy = sorted(m for m in sys.modules if m.split(".")[0] in names)
            return Response(f"{VALUE} {heavy}")
        """,
    )
    (root / "helper.py").write_text('VALUE = "aaa"\n')
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        assert client.get("/").text == "aaa []"  # the isolate never imported torch or the server
        (root / "helper.py").write_text('VALUE = "bbb"\n')  # same size, same second
        _redeploy(harness, root, deployment_id)
        assert client.get("/").text == "bbb []"
