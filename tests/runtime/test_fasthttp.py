"""``ember dev``'s HTTP fast path (``fasthttp.py``) puts the same bytes on the wire as uvicorn's.

Two real ``ember dev`` servers (``DevServer``, one with ``fast_http=False``: uvicorn's own
protocol and the router, the reference) serve the same worker on loopback. The same random
connections go to both over raw sockets: methods (HEAD included), HTTP/1.0 and 1.1, bodies
(none, empty, at and past the router's inline bound, chunked), keep-alive sequences and pipelined
batches, ``Connection: close``; the worker picks status, headers (duplicates, set-cookie), body
size (none, inline, streamed) and exceptions (error pages) from the request. Status line and
headers must match byte for byte (only the ``date`` value may differ: the two servers
may render it in different seconds), bodies too, and so must whether the connection was closed.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ember.runtime import events as E
from ember.runtime.asgiclient import INLINE_BODY_BYTES
from ember.runtime.fastrequest import FastRequest
from ember.runtime.isolate.events import INLINE_RESPONSE_BYTES
from ember.runtime.supervisor import Supervisor
from tests.runtime.dual_servers import DualServers, WireReader, exchange, read_response
from tests.runtime.harness import write_project

WORKER = """
import asyncio
import contextlib
import hashlib
import json
from urllib.parse import parse_qsl, urlsplit
import random
from workers import Response, WorkerEntrypoint


async def chunks(data):
    for start in range(0, len(data), 1000):
        yield data[start : start + 1000]


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        q = dict(parse_qsl(urlsplit(request.url).query))
        if q.get("sleep"):
            await asyncio.sleep(float(q["sleep"]))
        if q.get("raise"):
            raise ValueError("asked to fail " + q["raise"])
        received = await request.bytes()
        size = int(q.get("size", "-1"))
        body = random.Random(q.get("seed", "0")).randbytes(size) if size >= 0 else None
        seed = q.get("seed", "")
        headers = [(f"X-H{i % 2}", seed * (i + 1)) for i in range(int(q.get("headers", "0")))]
        headers += [("set-cookie", f"c{i}={i}; Path=/") for i in range(int(q.get("cookies", "0")))]
        headers.append(("x-received", hashlib.sha256(received).hexdigest()[:16]))
        headers.append(("x-seen", json.dumps([request.method, request.url, list(request.headers)])))
        if q.get("plain"):  # the same few heads again and again (cached encodings)
            headers = [("content-type", "text/plain")] * int(q["plain"])
        if q.get("date"):  # its own date (an upstream's passed through): uvicorn's is left out
            headers.append(("Date", "Tue, 01 Jan 2030 00:00:00 GMT"))
        if q.get("gen") and body is not None:  # the worker's own stream: no length known
            body = chunks(body)
        status, reason = int(q.get("status", "200")), q.get("reason", "")
        return Response(body, status=status, status_text=reason, headers=headers)
"""
SIZES = [-1, 0, 1, 13, INLINE_RESPONSE_BYTES, INLINE_RESPONSE_BYTES + 1]
METHODS = ["GET"] * 6 + ["POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DualServers, list[int]]]:
    root = write_project(tmp_path_factory.mktemp("fasthttp") / "fasthttp", WORKER)
    counted: list[int] = []
    on_head = FastRequest.on_head

    def counting(self: Any, head: Any) -> None:
        counted.append(1)
        on_head(self, head)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FastRequest, "on_head", counting)
        both = DualServers(root, tmp_path_factory.mktemp("fasthttp-state"))
        try:
            yield both, counted
        finally:
            both.close()


def _random_request(rng: random.Random, last: bool) -> tuple[bytes, str]:
    method = rng.choice(METHODS)
    query: dict[str, Any] = {
        "seed": rng.randrange(1 << 20),
        "size": rng.choice(SIZES + [rng.randrange(2048)]),
        "status": rng.choice([200, 200, 201, 204, 301, 404, 418, 500, 599]),
        "headers": rng.randrange(4),
        "cookies": rng.randrange(3),
    }
    if rng.random() < 0.1:
        query["raise"] = rng.randrange(100)
    if rng.random() < 0.3:  # the handler's own status text (percent-encoded)
        query["reason"] = rng.choice(["I%27m%20a%20teapot", "Caf%C3%A9", "x", "OK%7F"])
    if rng.random() < 0.3:
        query["plain"] = rng.randrange(3)
    if rng.random() < 0.3:
        query["gen"] = 1
    if rng.random() < 0.2:
        query["date"] = 1
    if query["status"] == 204:
        query["size"] = -1  # a 204 has no body to frame
    path = rng.choice(["/", "/p", "/a%20b/c", "/x/y.txt"])
    target = path + "?" + "&".join(f"{k}={v}" for k, v in query.items())
    version = "HTTP/1.0" if last and rng.random() < 0.2 else "HTTP/1.1"
    lines = [f"{method} {target} {version}", "Host: fast.test"]
    lines += [f"X-Extra-{i}: {rng.randrange(1000)}" for i in range(rng.randrange(3))]
    lines.append(rng.choice(["Accept: text/html", "Accept: */*", "accept: text/plain"]))
    if version == "HTTP/1.0":
        lines.append(rng.choice(["Connection: keep-alive", "X-Plain: 1"]))
    elif last and rng.random() < 0.3:
        lines.append("Connection: close")
    body = b""
    if method not in ("GET", "HEAD") or rng.random() < 0.05:
        kind = rng.choice(["none", "empty", "small", "inline", "over", "chunked"])
        if kind == "chunked" and version == "HTTP/1.1":
            body = rng.randbytes(rng.randrange(1, 5000))
            lines.append("Transfer-Encoding: chunked")
            head = "\r\n".join(lines).encode() + b"\r\n\r\n"
            return head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n", method
        if kind != "none":
            size = {"empty": 0, "small": 17, "inline": INLINE_BODY_BYTES}.get(
                kind, INLINE_BODY_BYTES + 1
            )
            body = rng.randbytes(size)
            lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + body, method


def test_fast_path_and_uvicorn_write_the_same_bytes(servers: tuple[DualServers, list[int]]) -> None:
    both, fast_heads = servers
    taken = len(fast_heads)
    both.client(lambda: _compare(both.addresses))
    assert len(fast_heads) > taken, "no request took the fast path"


def _compare(addresses: dict[bool, tuple[str, int]]) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    warm = [(b"GET /?size=1 HTTP/1.1\r\nHost: fast.test\r\n\r\n", "GET")]
    for fast in (True, False):
        exchange(addresses[fast], warm, False)  # isolates ready on both
    statuses: set[bytes] = set()
    for index in range(60):
        count = rng.randrange(1, 6)
        requests = [_random_request(rng, i == count - 1) for i in range(count)]
        pipelined = rng.random() < 0.4
        expected = exchange(addresses[False], requests, pipelined)
        got = exchange(addresses[True], requests, pipelined)
        assert got == expected, f"seed {seed}, connection {index}: {requests!r:.2000}"
        statuses |= {head.split(b" ")[1] for head, _ in expected[0]}
    assert {b"200", b"500"} <= statuses, f"seed {seed}"


def test_the_handlers_status_text_goes_out_on_both_paths(
    servers: tuple[DualServers, list[int]],
) -> None:
    both, _ = servers
    for fast in (True, False):
        for size in (1, INLINE_RESPONSE_BYTES + 1):  # written whole, and streamed
            lines = {}
            for reason in ("", "I%27m%20a%20teapot", "Caf%C3%A9"):
                target = f"/?status=418&size={size}&reason={reason}"
                raw = f"GET {target} HTTP/1.1\r\nHost: fast.test\r\n\r\n".encode()
                answers, _ = both.client(
                    lambda: exchange(both.addresses[fast], [(raw, "GET")], False)  # noqa: B023
                )
                lines[reason] = answers[0][0].partition(b"\r\n")[0]
            assert list(lines.values()) == [
                b"HTTP/1.1 418 I'm a Teapot",  # no status text: uvicorn's phrase, as before
                b"HTTP/1.1 418 I'm a teapot",
                "HTTP/1.1 418 Café".encode(),
            ], (fast, size)


def test_a_stream_to_an_http_1_0_client_is_sent_raw_until_the_connection_closes(
    servers: tuple[DualServers, list[int]],
) -> None:
    # HTTP/1.0 has no chunked encoding: a body of unknown length is sent as it is, and the
    # connection's end is its end (RFC 9112 6.3); chunk-size lines would corrupt it.
    both, _ = servers
    expected = random.Random("7").randbytes(5000)
    for fast in (True, False):
        for version in ("HTTP/1.0", "HTTP/1.1"):
            raw = f"GET /?size=5000&seed=7&gen=1 {version}\r\nHost: x\r\n\r\n".encode()

            def exchange() -> bytes:
                with socket.create_connection(both.addresses[fast], timeout=30) as sock:  # noqa: B023
                    sock.sendall(raw)  # noqa: B023
                    if version == "HTTP/1.1":  # noqa: B023
                        return read_response(WireReader(sock), "GET")[0]
                    received = b""
                    while chunk := sock.recv(65536):
                        received += chunk  # to the end: the server must close
                    return received

            if version == "HTTP/1.1":
                assert b"transfer-encoding: chunked" in both.client(exchange), fast
                continue
            head, _, body = both.client(exchange).partition(b"\r\n\r\n")
            assert b"transfer-encoding" not in head and b"content-length" not in head, head
            assert b"connection: close" in head, head
            assert body == expected, (fast, body[:40])


def test_a_client_leaving_cancels_its_request_on_both_paths(
    servers: tuple[DualServers, list[int]],
) -> None:
    both, _ = servers
    for fast in (True, False):
        tag = os.urandom(4).hex()
        request = f"GET /?sleep=30&t={tag} HTTP/1.1\r\nHost: fast.test\r\n\r\n".encode()
        both.client(lambda: _leave(both.addresses[fast], request))  # noqa: B023 (called now)
        events = both.sinks[fast].events
        seen = [e for e in events if tag in getattr(e, "url", "")]
        assert [e.outcome for e in seen] == ["canceled"], (fast, seen)


def _leave(address: tuple[str, int], request: bytes) -> None:
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(request)
        time.sleep(0.3)  # the request reached its isolate
    time.sleep(0.5)  # canceled within this (the reference: at its next sweep, within 0.1 s)


def test_a_failure_before_the_isolate_answers_as_uvicorn_does(
    servers: tuple[DualServers, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    both, _ = servers
    fetch_ready = Supervisor.fetch_ready

    def failing(self: Supervisor, deployment_id: str, request: Any) -> Any:
        if "boom" in request.url:
            raise RuntimeError("a supervisor bug")
        return fetch_ready(self, deployment_id, request)

    monkeypatch.setattr(Supervisor, "fetch_ready", failing)
    requests = [(b"GET /boom HTTP/1.1\r\nHost: fast.test\r\n\r\n", "GET")]
    answers = {
        fast: both.client(lambda: exchange(both.addresses[fast], requests, False))  # noqa: B023
        for fast in (True, False)
    }
    assert answers[True] == answers[False]
    assert answers[True][0][0][0].startswith(b"HTTP/1.1 500"), answers


def test_an_oversized_request_head_is_refused_on_both_paths(
    servers: tuple[DualServers, list[int]],
) -> None:
    """A head past 128 KiB gets 431 while it arrives; before the bound it reached the isolate
    as one frame past ``MAX_FRAME_BYTES`` and killed it (502 "crashed" for all it served)."""
    both, _ = servers
    for fast in (True, False):
        events = both.sinks[fast].events
        stopped = len([e for e in events if isinstance(e, E.LifecycleEvent)])
        answers = both.client(lambda: _oversized_then_usual(both.addresses[fast]))  # noqa: B023
        refused, after = answers
        assert refused.startswith(b"HTTP/1.1 431 "), (fast, refused[:200])
        assert after.startswith(b"HTTP/1.1 200 "), (fast, after[:200])
        lifecycle = [e for e in events if isinstance(e, E.LifecycleEvent)][stopped:]
        assert lifecycle == [], (fast, lifecycle)


def _oversized_then_usual(address: tuple[str, int]) -> tuple[bytes, bytes]:
    # Under the bound (64 KiB of header) is served; 2 MiB is refused before the head ends.
    fits = b"GET /?size=1 HTTP/1.1\r\nHost: fast.test\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n"
    served = exchange(address, [(fits, "GET")], False)
    assert served[0][0][0].startswith(b"HTTP/1.1 200 "), served
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: fast.test\r\nX-Big: ")
        try:
            sock.sendall(b"a" * (2 << 20) + b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed while the rest was being written
        refused = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(1 << 16):
                refused += chunk
    usual = b"GET /?size=1 HTTP/1.1\r\nHost: fast.test\r\nConnection: close\r\n\r\n"
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(usual)
        after = b""
        while chunk := sock.recv(1 << 16):
            after += chunk
    return refused, after
