"""The HTTP fast path with request bodies, streamed responses and binding mounts (``fasthttp.py``).

As ``test_fasthttp.py``: two real ``ember dev`` servers, one with ``fast_http=False`` (uvicorn's
own protocol and the router, the reference), the same random connections to both over raw
sockets, and the bytes on the wire compared (the ``date`` value aside). Here the project has a
binding whose type mounts HTTP routes (as the AI binding's REST API does) and whose service
streams, so the fast path must: leave the mount's paths to the mount; read small announced
bodies (POSTs with JSON, as ``env.AI.run`` requests are) and hand a body that did not come with
its head to uvicorn; write streamed bodies (a binding's stream piped by the supervisor, and a
worker's own stream through the isolate) chunked, with the same bytes; and on a client that
leaves mid-stream, close the service's stream and cancel the request as the router does.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import hashlib
import os
import random
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ember.bindings.base import BindingSpec, HttpMount, ServiceHost
from ember.bindings.registry import default_registry
from ember.runtime import faststream
from ember.runtime.asgiclient import INLINE_BODY_BYTES
from tests.runtime import slow_binding
from tests.runtime.dual_servers import DualServers, WireReader, exchange, read_response
from tests.runtime.harness import write_project
from tests.runtime.slow_binding import random_chunks

WORKER = """
import hashlib
from workers import Response, WorkerEntrypoint

SSE = {"content-type": "text/event-stream"}


async def relay(stream):
    async for chunk in stream:
        yield chunk


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kind = request.headers.get("x-kind", "")
        received = await request.bytes()
        digest = hashlib.sha256(received).hexdigest()[:16]
        headers = {**SSE, "x-received": digest, "x-method": request.method}
        seed = int(request.headers.get("x-seed", "0"))
        count = int(request.headers.get("x-chunks", "0"))
        status = int(request.headers.get("x-status", "200"))
        reason = request.headers.get("x-reason", "")
        if kind == "pipe":
            stream = await self.env.SLOW.random(seed, count)
            return Response(stream, status=status, status_text=reason, headers=headers)
        if kind == "relay":
            stream = relay(await self.env.SLOW.random(seed, count))
            return Response(stream, status=status, status_text=reason, headers=headers)
        if kind in ("forever", "stall"):
            stream = await getattr(self.env.SLOW, "stream" if kind == "forever" else "stall")(
                request.headers["x-tag"]
            )
            return Response(stream, headers=SSE)
        return Response(digest, status=status, status_text=reason, headers=headers)
"""


def slow_mount(host: ServiceHost, specs: tuple[BindingSpec, ...]) -> HttpMount:
    """A mount on ``/__slow/``: answers with what it received (the worker must not see it)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        answer = f"mount {scope['method']} {scope['path']} {len(body)}".encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return HttpMount(matches=lambda path: path.startswith("/__slow/"), app=app)


MOUNTED = dataclasses.replace(
    slow_binding.BINDING_TYPE, http="tests.runtime.test_fasthttp_streams:slow_mount"
)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DualServers, list[int]]]:
    root = write_project(
        tmp_path_factory.mktemp("faststreams") / "faststreams", WORKER, "slow:\n  binding: SLOW\n"
    )
    started: list[int] = []
    start = faststream.ChunkedBody.start

    def counting(self: Any, head: bytes) -> Any:
        started.append(1)
        return start(self, head)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(faststream.ChunkedBody, "start", counting)
        both = DualServers(
            root,
            tmp_path_factory.mktemp("faststreams-state"),
            registry=default_registry([MOUNTED]),
        )
        try:
            yield both, started
        finally:
            both.close()


def _random_request(rng: random.Random, last: bool) -> tuple[bytes, str]:
    method = rng.choice(["GET", "POST", "POST", "PUT"])
    kind = rng.choice(["pipe", "pipe", "relay", "inline"])
    path = rng.choice(["/", "/chat", "/__slow/run", "/__slowish"])
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: fast.test",
        f"x-kind: {kind}",
        f"x-seed: {rng.randrange(1 << 30)}",
        f"x-chunks: {rng.choice([0, 1, 2, 3, 8])}",
        f"x-status: {rng.choice([200, 200, 201, 404, 500])}",
    ]
    if rng.random() < 0.3:
        lines.append(f"x-reason: {rng.choice(['Streaming Along', 'x'])}")
    if last and rng.random() < 0.3:
        lines.append("Connection: close")
    body = b""
    if method != "GET" or rng.random() < 0.1:
        size = rng.choice([0, 1, 300, 4096, INLINE_BODY_BYTES, INLINE_BODY_BYTES + 1])
        body = rng.randbytes(size)
        lines.append(f"Content-Length: {size}")
        if rng.random() < 0.5:
            lines.append("content-type: application/json")
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + body, method


def test_streams_bodies_and_mounts_put_the_same_bytes_on_the_wire(
    servers: tuple[DualServers, list[int]],
) -> None:
    both, started = servers
    taken = len(started)
    both.client(lambda: _compare(both.addresses))
    assert len(started) > taken, "no streamed body took the fast path"


def _compare(addresses: dict[bool, tuple[str, int]]) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    warm = [(b"GET / HTTP/1.1\r\nHost: fast.test\r\n\r\n", "GET")]
    for fast in (True, False):
        exchange(addresses[fast], warm, False)  # isolates ready on both
    kinds: set[bytes] = set()
    for index in range(40):
        count = rng.randrange(1, 5)
        requests = [_random_request(rng, i == count - 1) for i in range(count)]
        pipelined = rng.random() < 0.3
        expected = exchange(addresses[False], requests, pipelined)
        got = exchange(addresses[True], requests, pipelined)
        assert got == expected, f"seed {seed}, connection {index}: {requests!r:.1500}"
        for head, body in expected[0]:
            kinds.add(b"mount" if body.startswith(b"mount ") else head.split(b"\r\n")[0])
    assert b"mount" in kinds and b"HTTP/1.1 200 OK" in kinds, f"seed {seed}: {kinds}"


def test_piped_bodies_are_the_service_stream(servers: tuple[DualServers, list[int]]) -> None:
    both, _ = servers
    rng = random.Random()
    for _ in range(4):
        seed, count = rng.randrange(1 << 30), rng.randrange(0, 10)
        body = rng.randbytes(rng.randrange(1, 2000))
        raw = (
            f"POST / HTTP/1.1\r\nHost: fast.test\r\nx-kind: pipe\r\nx-seed: {seed}\r\n"
            f"x-chunks: {count}\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode() + body
        answers, _ = both.client(lambda: exchange(both.addresses[True], [(raw, "POST")], False))  # noqa: B023
        head, content = answers[0]
        assert content == b"".join(random_chunks(seed, count))
        assert b"transfer-encoding: chunked" in head
        assert f"x-received: {hashlib.sha256(body).hexdigest()[:16]}".encode() in head


def test_a_body_that_arrives_after_its_head_is_read_as_uvicorn_reads_it(
    servers: tuple[DualServers, list[int]],
) -> None:
    both, _ = servers
    body = os.urandom(3000)
    head = (
        f"POST / HTTP/1.1\r\nHost: fast.test\r\nx-kind: pipe\r\nx-chunks: 2\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    answers = {
        fast: both.client(lambda: _split(both.addresses[fast], head, body))  # noqa: B023
        for fast in (True, False)
    }
    assert answers[True] == answers[False]
    assert f"x-received: {hashlib.sha256(body).hexdigest()[:16]}".encode() in answers[True][0]


def _split(address: tuple[str, int], head: bytes, body: bytes) -> tuple[bytes, bytes]:
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(head + body[:1000])
        time.sleep(0.2)  # the server read the head and part of the body in an earlier read
        sock.sendall(body[1000:])
        return read_response(WireReader(sock), "POST")


@pytest.mark.parametrize("kind", ["forever", "stall"])
def test_a_client_leaving_mid_stream_closes_the_stream_on_both_paths(
    servers: tuple[DualServers, list[int]], kind: str
) -> None:
    both, _ = servers
    tracker = both.servers[True].supervisor.resources.shared(  # type: ignore[union-attr]
        slow_binding.TRACKER_KEY, slow_binding.Tracker
    )
    reference = both.servers[False].supervisor.resources.shared(  # type: ignore[union-attr]
        slow_binding.TRACKER_KEY, slow_binding.Tracker
    )
    for fast, counts in ((True, tracker), (False, reference)):
        tag = f"leave-{fast}-{os.urandom(3).hex()}"
        raw = (
            f"POST /?t={tag} HTTP/1.1\r\nHost: fast.test\r\nx-kind: {kind}\r\nx-tag: {tag}\r\n"
            "content-length: 2\r\n\r\n{}"
        ).encode()
        both.client(lambda: _leave_mid_stream(both.addresses[fast], raw))  # noqa: B023
        assert counts.get(f"stream-closed:{tag}") == 1, fast
        events = both.sinks[fast].events
        seen = [e for e in events if tag in getattr(e, "url", "")]
        assert [e.outcome for e in seen] == ["canceled"], (fast, seen)


def _leave_mid_stream(address: tuple[str, int], raw: bytes) -> None:
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(raw)
        reader = WireReader(sock)
        reader.until(b"\r\n\r\n")
        reader.until(b"data: 0\n\n")  # the first event
    time.sleep(0.5)  # the stream is closed within this on both paths


def test_requests_leave_no_reference_cycles(servers: tuple[DualServers, list[int]]) -> None:
    """A request's objects are freed by reference counting when it ends (``ember/heap.py``
    relies on it): none of them is left for the cyclic collector to find."""
    both, _ = servers
    requests = [
        (
            f"POST / HTTP/1.1\r\nHost: fast.test\r\nx-kind: {kind}\r\nx-chunks: 3\r\n"
            "content-length: 2\r\n\r\n{}"
        ).encode()
        for kind in ("pipe", "relay", "inline")
    ]
    both.client(lambda: exchange(both.addresses[True], [(r, "POST") for r in requests], False))
    gc.collect()
    gc.disable()  # nothing is collected while the requests run: what they leave stays
    try:
        for pipelined in (False, True):
            exchanges = [(r, "POST") for r in requests] * 2
            both.client(lambda: exchange(both.addresses[True], exchanges, pipelined))  # noqa: B023
        both.client(lambda: time.sleep(0.3))  # the isolate's Done frames arrive
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = collections.Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    names = ("FastHttpProtocol", "FastRequest", "ChunkedBody", "InFlight", "ResponseStream")
    assert {name: found[name] for name in names if found[name]} == {}


def test_a_slow_reader_gets_the_whole_stream_under_flow_control(
    servers: tuple[DualServers, list[int]],
) -> None:
    """A client that does not read fills the socket buffers: the transport asks to pause, the
    writer waits for it to drain (and stops reading the body) and then resumes, losing nothing."""
    both, _ = servers
    rng = random.Random()
    seed = next(s for s in iter(lambda: rng.randrange(1 << 30), None) if _big(s))
    raw = (
        f"GET / HTTP/1.1\r\nHost: fast.test\r\nx-kind: pipe\r\nx-seed: {seed}\r\n"
        "x-chunks: 150\r\n\r\n"
    ).encode()
    expected = b"".join(random_chunks(seed, 150))
    warm = [(b"GET / HTTP/1.1\r\nHost: fast.test\r\n\r\n", "GET")]
    for fast in (True, False):
        both.client(lambda: exchange(both.addresses[fast], warm, False))  # noqa: B023
        got = both.client(lambda: _slow_read(both.addresses[fast], raw))  # noqa: B023
        assert got == expected, (fast, seed, len(got), len(expected))


def _big(seed: int) -> bool:
    return sum(len(chunk) for chunk in random_chunks(seed, 150)) > 3_000_000


def _slow_read(address: tuple[str, int], raw: bytes) -> bytes:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect(address)
        sock.sendall(raw)
        time.sleep(0.5)  # the server's writes back up meanwhile
        return read_response(WireReader(sock), "GET")[1]
