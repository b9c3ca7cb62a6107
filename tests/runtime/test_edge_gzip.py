"""A gzip-encoded response decoded at the edge for a client that did not accept gzip.

Cloudflare's edge (and ``wrangler dev``) decodes a worker's ``content-encoding: gzip``
response on the fly for a client whose request did not accept gzip (``curl`` without
``--compressed``: no ``Accept-Encoding``), dropping ``content-encoding`` and ``content-length``;
a client that accepts gzip gets the encoded bytes as they came. Both ``ember dev`` servers (the
fast HTTP path and uvicorn's with the router) are checked over raw sockets; the decoder on its
own in ``test_edge_gzip_decoder.py``; ``ember serve`` in ``tests/serve/test_edge_gzip_serve.py``.
"""

from __future__ import annotations

import gzip
import random
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from ember.runtime import edge_gzip
from tests.runtime.dual_servers import DualServers, WireReader
from tests.runtime.harness import write_project
from tests.runtime.upstream import Upstream

WORKER = """
import asyncio
import gzip
from workers import Response, fetch

async def on_fetch(request, env):
    path, _, query = request.url.split("/", 3)[-1].partition("?")
    upstream = request.headers["x-upstream"]
    if path == "pass":  # the upstream's encoded answer, unread
        return await fetch(upstream + "/gzip?" + query)
    if path == "rewrap":  # a new body under its headers: compressed by the runtime
        resp = await fetch(upstream + "/gzip?" + query)
        return Response((await resp.text()).upper(), headers=resp.headers)
    if path == "stream":  # streamed under content-encoding: gzip, pausing mid-way
        async def chunks():
            yield b"first part;"
            await (await fetch(upstream + "/hold?key=" + query)).text()
            yield b"second part"
        return Response(chunks(), headers={"content-encoding": "gzip"})
    if path == "bomb":  # 8 MiB of zeros in a few KiB, sent as they are
        body = gzip.compress(bytes(8 << 20))
        init = {"headers": {"content-encoding": "gzip"}, "encodeBody": "manual"}
        return Response.new(body, init)
    if path == "broken":  # good data, then a checksum that does not match it
        good = gzip.compress(b"good start;" * 100)
        async def chunks():
            yield good[: len(good) // 2]
            yield good[len(good) // 2 : -8] + bytes(8)
        init = {"headers": {"content-encoding": "gzip"}, "encodeBody": "manual"}
        return Response.new(chunks(), init)
    if path == "endless":  # a broken start, then a stream that never ends
        async def chunks():
            yield gzip.compress(b"start") [:-8] + bytes(8)
            while True:
                await asyncio.sleep(0.01)
                yield b"more"
        init = {"headers": {"content-encoding": "gzip"}, "encodeBody": "manual"}
        return Response.new(chunks(), init)
    return Response("unknown", status=404)
"""
PLAIN = b"hellohellohello"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DualServers]:
    root = write_project(
        tmp_path_factory.mktemp("edgegz") / "edgegz", WORKER, "limits:\n  max_response_mb: 1\n"
    )
    both = DualServers(root, tmp_path_factory.mktemp("edgegz-state"))
    yield both
    both.close()


def _request(path: str, upstream: Upstream, accept: str | None, method: str = "GET") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: edge.test", f"x-upstream: {upstream.url}"]
    if accept is not None:
        lines.append(f"Accept-Encoding: {accept}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _head(reader: WireReader) -> dict[str, str]:
    lines = reader.until(b"\r\n\r\n").decode("latin-1").split("\r\n")
    headers = {"status": lines[0].split()[1]}
    for line in lines[1:]:
        name, _, value = line.partition(": ")
        headers[name.lower()] = value
    return headers


def _chunks(reader: WireReader) -> Iterator[bytes]:
    """The chunks of a chunked body as they are framed on the wire."""
    while size := int(reader.until(b"\r\n"), 16):
        yield reader.exactly(size)
        reader.exactly(2)
    reader.exactly(2)


def _get(
    address: tuple[str, int], raw: bytes, method: str = "GET"
) -> tuple[dict[str, str], list[bytes]]:
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(raw)
        reader = WireReader(sock)
        head = _head(reader)
        if method == "HEAD":
            return head, []
        if head.get("transfer-encoding") == "chunked":
            return head, list(_chunks(reader))
        return head, [reader.exactly(int(head["content-length"]))]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("accept", [None, "", "identity", "gzip;q=0", "br, deflate", "*;q=0"])
def test_a_client_that_did_not_accept_gzip_gets_the_plain_body(
    servers: DualServers, upstream: Upstream, fast: bool, accept: str | None
) -> None:
    raw = _request("/pass?body=hello&n=3", upstream, accept)
    head, chunks = servers.client(lambda: _get(servers.addresses[fast], raw))
    assert head["status"] == "200"
    assert b"".join(chunks) == PLAIN
    assert "content-encoding" not in head and "content-length" not in head
    assert head["transfer-encoding"] == "chunked"
    # Everything else is kept: the upstream's type and its vary.
    assert head["content-type"] == "text/plain"
    assert head["vary"] == "accept-encoding"


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("accept", ["gzip", "GZIP", "deflate, gzip;q=0.5", "*", "x-gzip"])
def test_a_client_that_accepts_gzip_gets_the_encoded_bytes(
    servers: DualServers, upstream: Upstream, fast: bool, accept: str
) -> None:
    raw = _request("/pass?body=hello&n=3", upstream, accept)
    head, chunks = servers.client(lambda: _get(servers.addresses[fast], raw))
    assert head["content-encoding"] == "gzip"
    assert b"".join(chunks) == gzip.compress(PLAIN, mtime=0)
    assert head["content-length"] == str(len(chunks[0]))


@pytest.mark.parametrize("fast", [True, False])
def test_a_body_the_runtime_compressed_is_decoded_too(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    raw = _request("/rewrap?body=abc&n=4", upstream, None)
    head, chunks = servers.client(lambda: _get(servers.addresses[fast], raw))
    assert b"".join(chunks) == b"ABC" * 4
    assert "content-encoding" not in head


@pytest.mark.parametrize("fast", [True, False])
def test_a_large_body_is_decoded_in_bounded_chunks(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    raw = _request("/pass?random=600000", upstream, None)
    head, chunks = servers.client(lambda: _get(servers.addresses[fast], raw))
    assert b"".join(chunks) == random.Random(0).randbytes(600000)
    assert len(chunks) > 1 and max(map(len, chunks)) <= edge_gzip.CHUNK_BYTES


@pytest.mark.parametrize("fast", [True, False])
def test_a_streamed_body_is_decoded_as_it_arrives(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    key = f"edge-{fast}"

    def run() -> tuple[dict[str, str], bytes, bytes]:
        with socket.create_connection(servers.addresses[fast], timeout=60) as sock:
            sock.sendall(_request(f"/stream?{key}", upstream, None))
            reader = WireReader(sock)
            head = _head(reader)
            chunks = _chunks(reader)
            first = b""
            while b"first part;" not in first:  # before the handler may go on
                first += next(chunks)
            httpx.get(f"{upstream.url}/release?key={key}", timeout=30)
            return head, first, b"".join(chunks)

    head, first, rest = servers.client(run)
    assert first == b"first part;" and rest == b"second part"
    assert "content-encoding" not in head


@pytest.mark.parametrize("fast", [True, False])
def test_a_gzip_bomb_is_cut_at_the_response_size_limit(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    def run() -> tuple[dict[str, str], bytes, bool]:
        with socket.create_connection(servers.addresses[fast], timeout=60) as sock:
            sock.sendall(_request("/bomb", upstream, None))
            reader = WireReader(sock)
            head = _head(reader)
            got = b""
            try:
                for chunk in _chunks(reader):
                    got += chunk
            except EOFError:
                return head, got, False  # cut: no terminating chunk
            return head, got, True

    head, got, complete = servers.client(run)
    assert head["status"] == "200" and head["transfer-encoding"] == "chunked"
    assert "content-encoding" not in head
    assert not complete and got == bytes(len(got)) and len(got) <= 1 << 20
    # A client that accepts gzip gets the few KiB as they are.
    head, chunks = servers.client(
        lambda: _get(servers.addresses[fast], _request("/bomb", upstream, "gzip"))
    )
    assert gzip.decompress(b"".join(chunks)) == bytes(8 << 20)


@pytest.mark.parametrize("fast", [True, False])
def test_broken_gzip_mid_stream_cuts_the_response(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    def run() -> tuple[dict[str, str], bytes, bool]:
        with socket.create_connection(servers.addresses[fast], timeout=60) as sock:
            sock.sendall(_request("/broken", upstream, None))
            reader = WireReader(sock)
            head = _head(reader)
            got = b""
            try:
                for chunk in _chunks(reader):
                    got += chunk
            except EOFError:
                return head, got, False
            return head, got, True

    head, got, complete = servers.client(run)
    assert "content-encoding" not in head
    assert not complete  # as a body whose upstream failed: the connection is cut
    assert (b"good start;" * 100).startswith(got)


@pytest.mark.parametrize("fast", [True, False])
def test_head_drops_the_encoding_for_a_client_that_did_not_accept_it(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    raw = _request("/pass?body=hello&n=3", upstream, None, method="HEAD")
    head, _ = servers.client(lambda: _get(servers.addresses[fast], raw, "HEAD"))
    assert head["status"] == "200"
    assert "content-encoding" not in head


@pytest.mark.parametrize("fast", [True, False])
def test_a_stream_cut_for_broken_gzip_ends_its_request(
    servers: DualServers, upstream: Upstream, fast: bool
) -> None:
    supervisor = servers.servers[fast].supervisor
    assert supervisor is not None

    def run() -> bool:
        with socket.create_connection(servers.addresses[fast], timeout=60) as sock:
            sock.sendall(_request("/endless", upstream, None))
            reader = WireReader(sock)
            _head(reader)
            with pytest.raises(EOFError):  # cut
                list(_chunks(reader))
        # The worker's stream is read no further: its request is cancelled, as when a client
        # leaves, not left running until the wall-time limit. (Polled: the cancellation is
        # asynchronous; the bound is far above what it takes.)
        for _ in range(300):
            isolate = supervisor.isolate(supervisor.deployment_ids()[0])
            if isolate is not None and not isolate.inflight:
                return True
            time.sleep(0.05)
        return False

    assert servers.client(run)
