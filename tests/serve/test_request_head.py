"""A request head past 128 KiB is refused with 431 while it arrives, before any worker sees it.

uvicorn's httptools protocol buffers a header of any length; the platform then forwarded it to
the worker, whose isolate died on the frame (502 "crashed") with every request it was serving.
"""

from __future__ import annotations

import socket

import httpx

from ember.runtime.httphead import MAX_HEAD_BYTES
from tests.serve.conftest import ServeProcess, permanent_account, put_worker

ECHO = """\
from workers import Response


async def on_fetch(request, env):
    return Response(str(len(request.headers.get("x-big") or "")))
"""


def _raw(serve: ServeProcess, data: bytes) -> bytes:
    port = int(serve.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(data)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


def test_an_oversized_request_head_is_refused_and_the_worker_keeps_serving(
    serve: ServeProcess,
) -> None:
    account_id, token = permanent_account(serve, "heads")
    with serve.api(token) as api:
        assert put_worker(api, account_id, "echo", ECHO).status_code == 200
    # Under the bound: served as usual.
    fits = serve.worker("heads", "echo", headers={"x-big": "a" * (MAX_HEAD_BYTES // 2)})
    assert fits.status_code == 200 and fits.text == str(MAX_HEAD_BYTES // 2)
    # Over it, and never finished (no blank line): answered while it arrives.
    head = b"GET / HTTP/1.1\r\nHost: echo.heads.localhost\r\nX-Big: "
    reply = _raw(serve, head + b"a" * (MAX_HEAD_BYTES + 2048 - len(head)))
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    assert b"128 KiB" in reply
    after = httpx.get(serve.url + "/", headers={"host": "echo.heads.localhost"}, timeout=30)
    assert after.status_code == 200 and after.text == "0"
    # A body is not part of the head: a large POST in few reads is still served.
    posted = serve.worker("heads", "echo", method="POST", content=b"b" * (1024 * 1024))
    assert posted.status_code == 200
