"""A brotli-encoded upstream through ``fetch``, as workerd handles ``br`` (its
``brotli_content_encoding`` flag, on by default since 2024-04-29): asked for by default, the
body reaches the isolate still encoded and is decoded there as the handler reads it (in
bounded pieces, in the tenant's memory: a brotli decoder holds a window of up to 16 MiB that
the upstream chooses); the response keeps ``content-encoding: br``; returned unread the
encoded bytes go out as they came; a new body under that header is brotli-compressed on the
way out. The supervisor never decodes br (``test_fetch_bombs.py``)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path

import brotli
import pytest

from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream, raw_answer

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
    if path == "body":
        return Response(resp.body, headers=resp.headers)
    if path == "rewrap":  # a new body under the upstream's headers
        return Response((await resp.text()).upper(), headers=resp.headers)
    if path == "stream":  # a streamed new body under them
        async def chunks():
            async for chunk in resp.body:
                yield chunk.upper()
        return Response(chunks(), headers=resp.headers)
    try:
        return Response.json([resp.headers.get("content-encoding"), await resp.text()])
    except Exception as exc:
        return Response.json(["error", type(exc).__name__, str(exc)])
"""


@pytest.fixture(scope="module")
def worker(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    return harness.deploy(write_project(tmp_path_factory.mktemp("br") / "br", WORKER))


def _raw(harness: Harness, worker: str, upstream: Upstream, path: str) -> tuple[dict, bytes]:
    return raw_answer(harness, worker, upstream, path, "br")


def test_the_handler_reads_a_brotli_body_decoded_and_sees_the_header(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    with harness.client(worker) as client:
        got = client.get("/read?body=brotli!&n=300", headers={"x-upstream": upstream.url})
    assert json.loads(got.text) == ["br", "brotli!" * 300]


@pytest.mark.parametrize("path", ["/pass", "/body"])
@pytest.mark.parametrize("query", ["body=abc&n=5", "random=200000"])
def test_returned_unread_the_brotli_bytes_pass_through(
    harness: Harness, worker: str, upstream: Upstream, path: str, query: str
) -> None:
    headers, raw = _raw(harness, worker, upstream, f"{path}?{query}")
    plain = b"abc" * 5 if query.startswith("body") else random.Random(0).randbytes(200000)
    assert headers.get("content-encoding") == "br"
    assert raw == brotli.compress(plain)  # the upstream's very bytes, with their length
    assert headers.get("content-length") == str(len(raw))


@pytest.mark.parametrize("path", ["/rewrap", "/stream"])
def test_a_new_body_under_content_encoding_br_is_compressed(
    harness: Harness, worker: str, upstream: Upstream, path: str
) -> None:
    headers, raw = _raw(harness, worker, upstream, f"{path}?body=abc&n=400")
    assert headers.get("content-encoding") == "br"
    assert brotli.decompress(raw) == b"ABC" * 400
    assert headers.get("content-length") in (None, str(len(raw)))


def test_a_brotli_body_is_read_in_bounded_pieces_and_errors_are_workerds() -> None:
    """A 40-byte body that decodes to 20 MiB, fed whole or 3 bytes at a time, comes out in
    pieces of at most 64 KiB; cut, corrupt, or followed by other bytes, it is a TypeError
    in kj's words."""
    from ember.js_errors import JsException
    from ember.runtime.isolate.encoding import EncodedBody

    bomb = brotli.compress(b"\0" * (20 << 20), quality=11)

    async def sizes(parts: list[bytes]) -> list[int]:
        async def source() -> AsyncIterator[bytes]:
            for part in parts:
                yield part

        return [len(chunk) async for chunk in EncodedBody(source(), "br")]

    for parts in ([bomb], [bomb[i : i + 3] for i in range(0, len(bomb), 3)]):
        seen = asyncio.run(sizes(parts))
        assert (sum(seen), max(seen) <= 64 * 1024) == (20 << 20, True)
    text = brotli.compress(b"hello brotli " * 1000)
    with pytest.raises(JsException, match="(?i)brotli compressed stream ended prematurely"):
        asyncio.run(sizes([text[: len(text) // 2]]))
    with pytest.raises(JsException, match="(?i)brotli decompression failed"):
        asyncio.run(sizes([b"this is not brotli at all, not even close"]))
    with pytest.raises(JsException, match="(?i)brotli decompression failed"):
        asyncio.run(sizes([text, b"trailing bytes"]))
    assert asyncio.run(sizes([])) == []


@pytest.mark.parametrize(
    ("asked", "seen"),
    [("", "gzip, deflate"), ("identity", "identity"), ("gzip", "gzip"), ("br", "br")],
)
def test_fetch_asks_for_gzip_and_deflate_unless_the_handler_says(
    harness: Harness, worker: str, upstream: Upstream, asked: str, seen: str
) -> None:
    with harness.client(worker) as client:
        response = client.get(f"/echo?{asked}", headers={"x-upstream": upstream.url})
    assert response.text == seen


@pytest.mark.parametrize(
    ("keep", "asked", "seen"),
    [
        (True, None, "gzip, deflate"),
        (False, None, "gzip, deflate"),
        (False, "br", "br"),
    ],
)
def test_a_client_librarys_subrequest_asks_for_br_only_if_the_handler_did(
    tmp_path: Path, upstream: Upstream, keep: bool, asked: str | None, seen: str
) -> None:
    """A client library's body is decoded in the supervisor, which decodes no br: unless the
    library itself asks for br (it then decodes it, in the isolate), none is asked for."""
    from ember.bindings.base import StreamReply
    from ember.runtime.calls import CallContextImpl
    from ember.runtime.services import SharedResources
    from ember.runtime.subrequest import NetworkPolicy, SubrequestService

    async def main() -> str:
        resources = SharedResources(tmp_path / "state")
        try:
            service = SubrequestService(resources, 50, NetworkPolicy())
            headers = [] if asked is None else [["accept-encoding", asked]]
            call = ["GET", upstream.url + "/echo", headers, "follow", None]
            reply = await service.call("fetch", call + [True] if keep else call, _context())
            assert isinstance(reply, StreamReply)
            body = b"".join([chunk async for chunk in reply.chunks])
            return json.loads(body)["headers"].get("accept-encoding", "(none)")
        finally:
            await resources.aclose()

    def _context() -> CallContextImpl:
        return CallContextImpl("echo", 1, None, {})

    assert asyncio.run(main()) == seen
