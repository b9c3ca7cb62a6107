"""A compressed upstream through ``fetch``, as workerd handles it: the handler reads the body
decoded and sees the upstream's ``content-encoding``; returned as is, the encoded bytes go out
with that header and their length (not decoded and re-chunked); a new body under a
``content-encoding: gzip`` header is compressed on the way out (``encodeBody: "automatic"``)."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
from collections.abc import AsyncIterator

import pytest

from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream, raw_answer

WORKER = """
import json
from workers import Response, fetch

async def on_fetch(request, env):
    path, _, query = request.url.split("/", 3)[-1].partition("?")
    source = request.headers["x-upstream"] + "/gzip?" + query
    resp = await fetch(source, method="HEAD" if path == "head" else "GET")
    if path == "pass":
        return resp
    if path == "body":
        return Response(resp.body, headers=resp.headers)
    if path in ("read", "head"):
        text = await resp.text()
        return Response.json([resp.headers.get("content-encoding"), text])
    if path == "rewrap":  # a new body under the upstream's headers
        return Response((await resp.text()).upper(), headers=resp.headers)
    if path == "stream":  # a streamed new body under them
        async def chunks():
            async for chunk in resp.body:
                yield chunk.upper()
        return Response(chunks(), headers=resp.headers)
    if path == "manual":  # bytes already compressed, sent as they are
        import gzip
        init = {"headers": {"content-encoding": "gzip"}, "encodeBody": "manual"}
        return Response.new(gzip.compress(b"done", mtime=0), init)
    if path == "manual-clone":  # a copy keeps the bytes-already-compressed promise
        import gzip
        init = {"headers": {"content-encoding": "gzip"}, "encodeBody": "manual"}
        return Response.new(gzip.compress(b"done", mtime=0), init).clone()
    if path == "manual-replace":
        import gzip
        init = {"headers": {"content-encoding": "gzip"}, "encodeBody": "manual"}
        first = Response.new(gzip.compress(b"first", mtime=0), init)
        return first.replace_body(gzip.compress(b"done", mtime=0))
    return Response("unknown", status=404)
"""


@pytest.fixture(scope="module")
def worker(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    return harness.deploy(write_project(tmp_path_factory.mktemp("gz") / "gz", WORKER))


def _raw(harness: Harness, worker: str, upstream: Upstream, path: str) -> tuple[dict, bytes]:
    return raw_answer(harness, worker, upstream, path, "gzip")


@pytest.mark.parametrize("path", ["/pass", "/body"])
@pytest.mark.parametrize("query", ["body=hello&n=3", "random=200000"])
def test_returned_as_is_the_encoded_bytes_pass_through(
    harness: Harness, worker: str, upstream: Upstream, path: str, query: str
) -> None:
    headers, raw = _raw(harness, worker, upstream, f"{path}?{query}")
    plain = b"hellohellohello" if query.startswith("body") else random.Random(0).randbytes(200000)
    assert headers.get("content-encoding") == "gzip"
    assert raw == gzip.compress(plain, mtime=0)  # the upstream's very bytes
    assert headers.get("content-length") == str(len(raw))
    assert "transfer-encoding" not in headers


def test_the_handler_reads_it_decoded_and_sees_the_header(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    with harness.client(worker) as client:
        got = client.get("/read?body=hi&n=2", headers={"x-upstream": upstream.url})
    assert json.loads(got.text) == ["gzip", "hihi"]


@pytest.mark.parametrize("path", ["/rewrap", "/stream"])
def test_a_new_body_under_content_encoding_gzip_is_compressed(
    harness: Harness, worker: str, upstream: Upstream, path: str
) -> None:
    headers, raw = _raw(harness, worker, upstream, f"{path}?body=abc&n=4")
    assert headers.get("content-encoding") == "gzip"
    assert gzip.decompress(raw) == b"ABC" * 4
    # Its length is not the upstream's: the new bytes are framed by their own.
    assert headers.get("content-length") in (None, str(len(raw)))


@pytest.mark.parametrize("path", ["/manual", "/manual-clone", "/manual-replace"])
def test_encode_body_manual_sends_the_bytes_as_they_are(
    harness: Harness, worker: str, upstream: Upstream, path: str
) -> None:
    """Also from ``clone()`` and ``replace_body()`` of such a response (they compressed the
    bytes a second time)."""
    headers, raw = _raw(harness, worker, upstream, f"{path}?body=x")
    assert headers.get("content-encoding") == "gzip"
    assert raw == gzip.compress(b"done", mtime=0)


def test_a_corrupt_or_cut_gzip_body_is_workerds_error() -> None:
    from ember.js_errors import JsException
    from ember.runtime.isolate.encoding import EncodedBody

    async def read(raw: bytes) -> bytes:
        return b"".join([chunk async for chunk in EncodedBody(raw, "gzip")])

    encoded = gzip.compress(b"x" * 1000)
    assert asyncio.run(read(encoded)) == b"x" * 1000
    with pytest.raises(JsException, match="Gzip compressed stream ended prematurely"):
        asyncio.run(read(encoded[:-10]))
    with pytest.raises(JsException, match="Gzip decompression failed"):
        asyncio.run(read(b"\x1f\x8b" + b"\xff" * 20))


@pytest.mark.parametrize("members", [2, 3])
def test_concatenated_gzip_members_read_as_one_body(
    harness: Harness, worker: str, upstream: Upstream, members: int
) -> None:
    """``cat a.gz b.gz`` is one gzip body (RFC 1952 2.2), as workerd decodes it; the handler
    read the first member only. Returned unread, the bytes still pass as they came."""
    query = f"body=abcdef&n=50&members={members}"
    with harness.client(worker) as client:
        got = client.get(f"/read?{query}", headers={"x-upstream": upstream.url})
    assert json.loads(got.text) == ["gzip", "abcdef" * 50]
    headers, raw = _raw(harness, worker, upstream, f"/pass?{query}")
    assert gzip.decompress(raw) == b"abcdef" * 50
    assert raw.count(b"\x1f\x8b\x08") == members


def test_gzip_members_split_anywhere_decode_in_bounded_pieces() -> None:
    """Members whose boundary falls inside a chunk, on one, or across two; a bomb in a later
    member still comes out in pieces of at most 64 KiB; bytes after a member that are no gzip
    are workerd's error, and so is a later member cut short."""
    from ember.js_errors import JsException
    from ember.runtime.isolate.encoding import EncodedBody

    first, bomb = gzip.compress(b"first;"), gzip.compress(b"\0" * (8 << 20))
    encoded = first + bomb + gzip.compress(b";last")

    async def read(parts: list[bytes]) -> list[bytes]:
        async def source() -> AsyncIterator[bytes]:
            for part in parts:
                yield part

        return [chunk async for chunk in EncodedBody(source(), "gzip")]

    for cut in (3, len(first), len(first) + 5, len(encoded) - 2):
        seen = asyncio.run(read([encoded[:cut], encoded[cut:]]))
        assert b"".join(seen) == b"first;" + b"\0" * (8 << 20) + b";last", cut
        assert max(map(len, seen)) == 64 * 1024
    with pytest.raises(JsException, match="Gzip decompression failed"):
        asyncio.run(read([first, b"not gzip at all"]))
    with pytest.raises(JsException, match="Gzip compressed stream ended prematurely"):
        asyncio.run(read([first, bomb[:-10]]))


@pytest.mark.parametrize("streamed", [False, True])
def test_a_gzip_body_is_read_in_bounded_pieces(streamed: bool) -> None:
    """A 20 KB body that decodes to 20 MiB comes out in pieces of at most 64 KiB, not as one
    20 MiB chunk (a streaming reader of a 100 KB one got 503 memory_limit)."""
    from ember.runtime.isolate.encoding import EncodedBody

    encoded = gzip.compress(b"\0" * (20 << 20))

    async def source() -> AsyncIterator[bytes]:
        yield encoded[:100]
        yield encoded[100:]

    async def sizes() -> list[int]:
        body = EncodedBody(source() if streamed else encoded, "gzip")
        return [len(chunk) async for chunk in body]

    seen = asyncio.run(sizes())
    assert (sum(seen), max(seen)) == (20 << 20, 64 * 1024)


@pytest.mark.parametrize("path", ["/head?body=x", "/read?status=204", "/read?empty=1"])
def test_no_body_under_content_encoding_gzip_reads_as_empty(
    harness: Harness, worker: str, upstream: Upstream, path: str
) -> None:
    """HEAD, 204, 304 or an empty body with ``content-encoding: gzip`` read as "" (it raised
    "Gzip compressed stream ended prematurely")."""
    with harness.client(worker) as client:
        response = client.get(path, headers={"x-upstream": upstream.url})
    assert response.status_code == 200, response.text
    assert response.json() == ["gzip", ""]


def test_many_gzip_members_in_one_chunk_are_fed_in_small_slices() -> None:
    """After each member zlib copies the rest of its input into ``unused_data``: a chunk fed
    whole was copied once per member (quadratic CPU, charged to the tenant). Fed in small
    slices, no copy is larger than a slice: the most memory held stays far below the chunk's."""
    import tracemalloc

    from ember.runtime.isolate.encoding import EncodedBody

    rng = random.Random(7)
    encoded = b"".join(gzip.compress(rng.randbytes(256), mtime=0) for _ in range(4000))

    async def read() -> tuple[int, int]:
        tracemalloc.start()
        try:
            total = sum([len(chunk) async for chunk in EncodedBody(encoded, "gzip")])
            return total, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    total, peak = asyncio.run(read())
    assert total == 4000 * 256
    assert peak < len(encoded) // 4, peak
