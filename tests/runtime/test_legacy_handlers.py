"""Handler shapes outside the WorkerEntrypoint-with-request norm that real scripts still use:
the legacy ``@handler`` decorator and a ``fetch`` that takes no request."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project


def test_legacy_handler_decorator_and_fetch_without_a_request(
    harness: Harness, tmp_path: Path
) -> None:
    legacy = """
    from workers import Response, handler

    @handler
    async def on_fetch(request, env):
        return Response("legacy " + request.method)
    """
    bare = """
    from workers import Response, WorkerEntrypoint

    class Default(WorkerEntrypoint):
        async def fetch(self):
            return Response("no request")
    """
    legacy_id = harness.deploy(write_project(tmp_path / "legacy", legacy))
    bare_id = harness.deploy(write_project(tmp_path / "bare", bare))
    with harness.client(legacy_id) as client:
        assert client.get("/").text == "legacy GET"
    with harness.client(bare_id) as client:
        assert client.get("/").text == "no request"
