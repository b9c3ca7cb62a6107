"""A brotli-encoded upstream through ``fetch``: decoded, as workerd decodes ``br`` (its
``brotli_content_encoding`` flag, on by default since 2024-04-29), and asked for by default.

ember decodes it in the supervisor (in bounded pieces: ``test_fetch_bombs.py``), so unlike
workerd's the handler's response has no ``content-encoding: br`` header and its body is the
decoded bytes; passed through unread, it goes out decoded (a gzip one goes out as it came).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream

WORKER = """
from workers import Response, fetch

async def on_fetch(request, env):
    path, _, query = request.url.split("/", 3)[-1].partition("?")
    upstream = request.headers["x-upstream"]
    if path == "echo":  # what the upstream was asked for, with the handler's headers or none
        sent = {"accept-encoding": query} if query else {}
        resp = await fetch(upstream + "/echo", headers=sent)
        return Response((await resp.json())["headers"].get("accept-encoding", "(none)"))
    resp = await fetch(upstream + "/gzip?coding=br&" + query)
    if path == "pass":
        return resp
    return Response.json([resp.headers.get("content-encoding"), await resp.text()])
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def worker(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    return harness.deploy(write_project(tmp_path_factory.mktemp("br") / "br", WORKER))


def test_the_handler_reads_a_brotli_body_decoded(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    with harness.client(worker) as client:
        got = client.get("/read?body=brotli!&n=300", headers={"x-upstream": upstream.url})
        passed = client.get("/pass?body=abc&n=5", headers={"x-upstream": upstream.url})
    assert json.loads(got.text) == [None, "brotli!" * 300]
    assert passed.headers.get("content-encoding") != "br"
    assert passed.text == "abc" * 5


@pytest.mark.parametrize(
    ("asked", "seen"), [("", "gzip, deflate, br"), ("identity", "identity"), ("gzip", "gzip")]
)
def test_fetch_asks_for_gzip_deflate_and_br_unless_the_handler_says(
    harness: Harness, worker: str, upstream: Upstream, asked: str, seen: str
) -> None:
    with harness.client(worker) as client:
        response = client.get(f"/echo?{asked}", headers={"x-upstream": upstream.url})
    assert response.text == seen
