"""On ``ember serve`` as on ``ember dev`` (``tests/runtime/test_edge_gzip.py``): a response under
``content-encoding: gzip`` reaches a client that did not accept gzip decoded, as Cloudflare's
edge decodes it, and one that accepts gzip encoded."""

from __future__ import annotations

import gzip
import socket
from urllib.parse import urlsplit

import pytest

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """\
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        headers = {"content-encoding": "gzip", "x-kept": "yes"}
        if request.url.endswith("/stream"):
            async def chunks():
                for i in range(3):
                    yield f"part {i};".encode()
            return Response(chunks(), headers=headers)
        return Response("hello " * 50, headers=headers)
"""


def _exchange(serve: ServeProcess, host: str, path: str, accept: str | None) -> tuple[str, bytes]:
    """(head, body as framed) of one request over a raw socket, as curl sends it."""
    parts = urlsplit(serve.url)
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if accept is not None:
        lines.append(f"Accept-Encoding: {accept}")
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1").lower()
    if "transfer-encoding: chunked" in text:
        plain = b""
        while True:
            size_line, _, body = body.partition(b"\r\n")
            size = int(size_line, 16)
            if not size:
                break
            plain, body = plain + body[:size], body[size + 2 :]
        body = plain
    return text, body


@pytest.fixture(scope="module")
def host(serve: ServeProcess) -> str:
    account_id, token = permanent_account(serve, "edgegz")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "gz", WORKER).status_code == 200
    return "gz.edgegz.localhost"


@pytest.mark.parametrize("path", ["/", "/stream"])
def test_serve_decodes_gzip_for_a_client_that_did_not_accept_it(
    serve: ServeProcess, host: str, path: str
) -> None:
    expected = b"hello " * 50 if path == "/" else b"part 0;part 1;part 2;"

    head, body = _exchange(serve, host, path, None)
    assert head.startswith("http/1.1 200")
    assert body == expected
    assert "content-encoding" not in head and "content-length" not in head
    assert "x-kept: yes" in head

    head, body = _exchange(serve, host, path, "gzip, deflate")
    assert "content-encoding: gzip" in head
    assert gzip.decompress(body) == expected
