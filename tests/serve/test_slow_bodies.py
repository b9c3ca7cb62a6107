"""Trickled request bodies against a real ``ember serve``, with a short ``server.body_timeout``.

A client that sent a head announcing ``Content-Length: 1000000`` (or a chunked body) and then one
byte every few seconds held a connection and a task for ever, on every route: the client/v4 API
(KV values, uploads), the Workers AI REST and OpenAI-compatible routes, and the workers. Now a
body must arrive within ``server.body_timeout`` of its head (plus a second per
``server.body_min_rate`` bytes that came): past it ``408`` and the connection closed, and nothing
of the half-sent body is stored or deployed.

Nothing asserts on time: each client waits, with a generous bound, for the answer it should get.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account, put_worker

LIMITS = """\
server:
  body_timeout: 1s
  body_min_rate: 1KiB
"""
ECHO = """\
import asyncio
import hashlib
from urllib.parse import parse_qsl, urlsplit
from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        wait = dict(parse_qsl(urlsplit(request.url).query)).get("wait")
        if wait:  # reads nothing meanwhile: the platform holds the body back (flow control)
            await asyncio.sleep(float(wait))
        body = await request.bytes()
        return Response(f"{len(body)} {hashlib.sha256(body).hexdigest()}")
"""
PATIENCE_S = 60.0  # how long a client waits for what it should get; never asserted on
MODEL = "@cf/zai-org/glm-4.7-flash"


@dataclass
class Scene:
    serve: ServeProcess
    account: str
    token: str
    namespace: str

    @property
    def port(self) -> int:
        return int(self.serve.url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    serve = ServeProcess(tmp_path_factory.mktemp("bodies") / "state", BASE_CONFIG + LIMITS)
    try:
        account, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            made = api.post(f"/accounts/{account}/storage/kv/namespaces", json={"title": "t"})
            assert made.status_code == 200, made.text
            deployed = put_worker(api, account, "echo", ECHO)
            assert deployed.status_code == 200, deployed.text
        yield Scene(serve, account, token, made.json()["result"]["id"])
    finally:
        serve.stop()


def _head(scene: Scene, route: str, framing: str, extra: str = "") -> bytes:
    """A request head for ``route`` whose body (``framing``: ``length`` or ``chunked``) follows."""
    auth = f"Host: x\r\nAuthorization: Bearer {scene.token}\r\n"
    a = scene.account
    line, headers = {
        "kv-value": (f"PUT /client/v4/accounts/{a}/storage/kv/namespaces/{scene.namespace}"
                     "/values/half", auth),
        "upload": (f"PUT /client/v4/accounts/{a}/workers/scripts/half",
                   auth + "Content-Type: multipart/form-data; boundary=b\r\n"),
        "ai-run": (f"POST /client/v4/accounts/{a}/ai/run/{MODEL}",
                   auth + "Content-Type: application/json\r\n"),
        "ai-v1": ("POST /ai/v1/chat/completions", auth + "Content-Type: application/json\r\n"),
        "worker-inline": ("POST /", "Host: echo.acme.localhost\r\n"),  # the router reads it whole
        "worker-streamed": ("POST /", "Host: echo.acme.localhost\r\n"),  # streamed to the isolate
    }[route]  # fmt: skip
    if framing == "chunked":
        size = "Transfer-Encoding: chunked\r\n"
    else:
        size = f"Content-Length: {1000 if route == 'worker-inline' else 1_000_000}\r\n"
    return f"{line} HTTP/1.1\r\n{headers}{size}{extra}\r\n".encode()


def _connect(scene: Scene) -> socket.socket:
    return socket.create_connection(("127.0.0.1", scene.port), timeout=PATIENCE_S)


def _trickle_until_answered(conn: socket.socket, piece: bytes, every: float = 0.2) -> bytes:
    """The slow client: ``piece`` every ``every`` s until the server answers and closes."""
    conn.settimeout(every)
    deadline = time.monotonic() + PATIENCE_S
    reply = b""
    while time.monotonic() < deadline:
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            if not reply:
                with contextlib.suppress(OSError):  # closed under us: the reply says why
                    conn.sendall(piece)
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break  # closed: the whole answer is in reply
        reply += chunk
    return reply


def _slow_body(scene: Scene, route: str, framing: str) -> bytes:
    piece = b"1\r\nx\r\n" if framing == "chunked" else b"x"
    with _connect(scene) as conn:
        conn.sendall(_head(scene, route, framing))
        return _trickle_until_answered(conn, piece)


ROUTES = ["kv-value", "upload", "ai-run", "ai-v1", "worker-inline", "worker-streamed"]


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize("route", ROUTES)
def test_a_trickled_body_is_answered_408_and_closed(scene: Scene, route: str, framing: str) -> None:
    if route == "worker-inline" and framing == "chunked":
        pytest.skip("a chunked body has no announced length: always streamed")
    reply = _slow_body(scene, route, framing)  # returns once the server closed the connection
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:300]
    assert b"connection: close" in reply.lower()
    assert b"(server.body_timeout" in reply, reply
    # The application saw the client gone, which is no server error: no traceback for it (an
    # honest request first: the same event loop has run the timed-out request's end by then).
    with scene.serve.api(scene.token) as api:
        assert api.get("/accounts").status_code == 200
    assert "Traceback" not in scene.serve.output(), scene.serve.output()[-3000:]


def test_a_half_sent_kv_value_or_upload_leaves_nothing_behind(scene: Scene) -> None:
    for route in ("kv-value", "upload"):
        assert _slow_body(scene, route, "length").startswith(b"HTTP/1.1 408 ")
    with scene.serve.api(scene.token) as api:
        base = f"/accounts/{scene.account}"
        value = api.get(f"{base}/storage/kv/namespaces/{scene.namespace}/values/half")
        assert value.status_code == 404, value.text
        scripts = api.get(f"{base}/workers/scripts").json()["result"]
        assert "half" not in [script["id"] for script in scripts]


def test_a_body_after_an_early_answer_is_not_waited_for(scene: Scene) -> None:
    # No token: the API answers 401 without reading the body; the trickle that follows must not
    # keep the connection (nor get a second answer, read as the next request's).
    a = scene.account
    head = (
        f"PUT /client/v4/accounts/{a}/storage/kv/namespaces/{scene.namespace}/values/k HTTP/1.1\r\n"
        "Host: x\r\nContent-Length: 1000000\r\n\r\n"
    ).encode()
    with _connect(scene) as conn:
        conn.sendall(head)
        reply = _trickle_until_answered(conn, b"x")
    assert reply.startswith(b"HTTP/1.1 401 "), reply[:300]
    assert b"HTTP/1.1 408" not in reply


def test_a_large_body_sent_at_once_is_served(scene: Scene) -> None:
    body = bytes(range(256)) * (5 * 4096)  # 5 MiB
    with scene.serve.api(scene.token) as api:
        path = f"/accounts/{scene.account}/storage/kv/namespaces/{scene.namespace}/values/big"
        assert api.put(path, content=body).status_code == 200
        assert api.get(path).content == body
    echoed = scene.serve.worker("acme", "echo", method="POST", content=body)
    assert echoed.text == f"{len(body)} {hashlib.sha256(body).hexdigest()}"


def _steady(scene: Scene, head: bytes, pieces: list[bytes]) -> bytes:
    """``pieces`` 0.1 s apart (longer in all than body_timeout, faster than body_min_rate)."""
    with _connect(scene) as conn:
        conn.sendall(head)
        for piece in pieces:
            time.sleep(0.1)
            conn.sendall(piece)
        return _read_response(conn)


def _read_response(conn: socket.socket) -> bytes:
    conn.settimeout(PATIENCE_S)
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += conn.recv(65536)
    head, _, body = reply.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)
    return head.split(b"\r\n")[0] + b"\r\n" + body


def test_a_slow_steady_body_that_keeps_the_minimum_rate_is_served(scene: Scene) -> None:
    pieces = [bytes([65 + n]) * 1024 for n in range(20)]  # 20 KiB in ~2 s: 10 KiB/s
    body = b"".join(pieces)
    kv = f"/client/v4/accounts/{scene.account}/storage/kv/namespaces/{scene.namespace}/values/slow"
    head = f"PUT {kv} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {scene.token}\r\n"
    stored = _steady(scene, f"{head}Content-Length: {len(body)}\r\n\r\n".encode(), pieces)
    assert stored.startswith(b"HTTP/1.1 200 "), stored[:300]
    with scene.serve.api(scene.token) as api:
        assert api.get(kv.removeprefix("/client/v4")).content == body
    chunked = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces] + [b"0\r\n\r\n"]
    head = "POST / HTTP/1.1\r\nHost: echo.acme.localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
    echoed = _steady(scene, head.encode(), chunked)
    assert echoed.startswith(b"HTTP/1.1 200 "), echoed[:300]
    assert echoed.endswith(f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode())


def test_time_the_platform_holds_the_body_back_is_not_the_clients(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The worker reads nothing for 3 s: once its buffers are full the platform stops reading
    # (flow control), and the client cannot send. That wait is not the client's slowness.
    strict = "server: {body_timeout: 1s, body_min_rate: 1GiB}\n"  # (no allowance for progress)
    serve = ServeProcess(tmp_path_factory.mktemp("held") / "state", BASE_CONFIG + strict)
    try:
        account, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            assert put_worker(api, account, "echo", ECHO).status_code == 200
        body = b"z" * (32 * 1024 * 1024)
        echoed = serve.worker("acme", "echo", "/?wait=3", method="POST", content=body)
        assert echoed.text == f"{len(body)} {hashlib.sha256(body).hexdigest()}", echoed.text[:300]
    finally:
        serve.stop()
