"""``ember serve`` answers with one ``date`` (the worker's when it set one, as a response passed
through from an upstream does) and adds no ``server`` header; uvicorn's own ``date`` came in
front of the worker's, so a proxied response carried two."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

UPSTREAM_DATE = "Tue, 01 Jan 2030 00:00:00 GMT"
WORKER = f"""\
from workers import Response


async def on_fetch(request, env):
    if request.url.endswith("/own"):
        return Response("proxied", headers={{"date": "{UPSTREAM_DATE}", "server": "upstream"}})
    return Response("plain")
"""


@pytest.fixture(scope="module")
def host(serve: ServeProcess) -> Iterator[str]:
    account, token = permanent_account(serve, "headers")
    with serve.api(token) as api:
        reply = put_worker(api, account, "dates", WORKER)
    assert reply.status_code == 200, reply.text
    yield "dates.headers.localhost"  # worker name, then the account's name


def _head(url: str, host: str, path: str) -> list[tuple[bytes, bytes]]:
    address, port = url.removeprefix("http://").split(":")
    with socket.create_connection((address, int(port)), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    lines = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    return [(n.strip().lower(), v.strip()) for n, v in (line.split(b":", 1) for line in lines)]


def test_the_worker_s_date_is_the_only_one(serve: ServeProcess, host: str) -> None:
    fields = _head(serve.url, host, "/own")
    assert [v for n, v in fields if n == b"date"] == [UPSTREAM_DATE.encode()]
    assert [v for n, v in fields if n == b"server"] == [b"upstream"]


def test_a_response_without_a_date_gets_one_and_no_server(serve: ServeProcess, host: str) -> None:
    fields = _head(serve.url, host, "/")
    assert len([n for n, _ in fields if n == b"date"]) == 1
    assert b"server" not in [n for n, _ in fields]
