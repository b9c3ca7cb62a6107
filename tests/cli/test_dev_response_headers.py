"""``ember dev`` answers with the worker's headers and one ``date``, and no ``server`` header of
its own: workerd (``wrangler dev``) adds neither ``date`` nor ``server``, and a response proxied
from an upstream keeps the upstream's. uvicorn's own ``date`` and ``server: uvicorn`` came in
front of the worker's, so a proxied response carried two of each."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.cli.devprocess import DevProcess

UPSTREAM_DATE = "Tue, 01 Jan 2030 00:00:00 GMT"
WORKER = f"""
from workers import Response

async def on_fetch(request):
    path = request.url.split("?")[0].rsplit("/", 1)[-1]
    proxied = {{"date": "{UPSTREAM_DATE}", "server": "upstream-server"}}
    if path == "own":  # what a fetched response passed through carries
        return Response("proxied", headers=proxied)
    if path == "own-stream":
        async def body():
            yield b"streamed"
        return Response(body(), headers=proxied)
    if path == "own-big":  # past the inline size: another writer
        return Response(b"x" * 200_000, headers=proxied)
    return Response("plain")
"""


def _head(url: str, path: str, method: str = "GET") -> list[tuple[bytes, bytes]]:
    """The raw response head's fields (httpx would hide repeated fields' order)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(f"{method} /{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    lines = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    return [(n.strip().lower(), v.strip()) for n, v in (line.split(b":", 1) for line in lines)]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    root = tmp_path_factory.mktemp("headers")
    (root / "worker.py").write_text(WORKER)
    (root / "ember.yaml").write_text("name: headers\nmain: worker.py\n")
    with DevProcess(root, state=root / "state") as process:
        yield process


@pytest.mark.parametrize(
    ("path", "method"),
    [("own", "GET"), ("own-stream", "GET"), ("own-big", "GET"), ("own", "HEAD")],
)
def test_a_worker_date_is_the_only_date_and_no_server_is_added(
    dev: DevProcess, path: str, method: str
) -> None:
    fields = _head(dev.url, path, method)
    assert [v for n, v in fields if n == b"date"] == [UPSTREAM_DATE.encode()]
    assert [v for n, v in fields if n == b"server"] == [b"upstream-server"]


def test_a_response_without_a_date_gets_one_and_no_server(dev: DevProcess) -> None:
    fields = _head(dev.url, "plain")
    assert len([n for n, _ in fields if n == b"date"]) == 1
    assert b"server" not in [n for n, _ in fields]
    assert httpx.get(f"{dev.url}/plain").text == "plain"


def test_ember_s_own_answers_have_one_date_and_no_server(dev: DevProcess) -> None:
    fields = _head(dev.url, "cdn-cgi/handler/scheduled")  # answered by ember, not the worker
    assert len([n for n, _ in fields if n == b"date"]) == 1
    assert b"server" not in [n for n, _ in fields]
