"""The isolate protocol and HTTP edges: garbage and oversized frames, forged frames, crashes,
huge responses, huge and slow requests, clients that leave mid-stream."""

from __future__ import annotations

import os
import socket
import time

import httpx
import pytest

from ember.runtime.monitor import process_rss_bytes
from tests.security.handlers import handler
from tests.security.platform import ATTACKER_LIMITS, Guard, wait_until

FRAMES = handler(
    """
    import stat
    import struct
    from ember.runtime.protocol import Hello, encode
    from ember.runtime.protocol import Response as ResponseFrame

    def nested(depth):
        payload = b"\\x91" * depth + b"\\xc0"
        return struct.pack(">I", len(payload)) + payload

    PAYLOADS = {
        "garbage": b"\\x00\\x00\\x00\\x05hello",
        "oversized": b"\\xff\\xff\\xff\\xff" + b"x" * 64,
        "bomb": struct.pack(">I", 5) + b"\\xdd\\xff\\xff\\xff\\xff",
        "nested": nested(200_000),
        "forged-response": encode(ResponseFrame(9999, 200, [], b"pwned", 0, True)),
        "second-hello": encode(Hello(1, 1)),
    }

    async def attack(request, env):
        data = PAYLOADS[request.headers["x-attack"]]
        for fd in range(3, 256):  # every socket we hold, the supervisor's among them
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, data)
            except OSError:
                pass
        await asyncio.sleep(5)
        return Response("still here")
    """
)

CRASH = handler(
    """
    import ctypes

    async def attack(request, env):
        if request.headers["x-attack"] == "exit":
            os._exit(0)
        ctypes.string_at(0)
    """
)

HUGE_RESPONSE = handler(
    """
    async def forever():
        chunk = b"x" * (64 << 10)
        while True:
            yield chunk

    async def attack(request, env):
        if request.headers["x-attack"] == "inline":
            return Response(b"x" * (4 << 20))
        return Response(forever())
    """
)

SLOW = handler(
    """
    async def trickle():
        while True:
            yield b"."
            await asyncio.sleep(0.05)

    async def attack(request, env):
        kind = request.headers["x-attack"]
        if kind == "read-body":
            return Response(str(len(await request.text())))
        if kind == "stream":
            return Response(trickle())
        await asyncio.sleep(30)
        return Response("late")
    """
)


@pytest.mark.parametrize(
    "kind", ["garbage", "oversized", "bomb", "nested", "forged-response", "second-hello"]
)
def test_hostile_frames_end_the_worker_with_a_protocol_error(guard: Guard, kind: str) -> None:
    attacker = guard.attacker(FRAMES)
    before = attacker.warm()
    reply = attacker.attack(kind)
    assert (reply.status_code, reply.headers.get("x-ember-error")) == (502, "protocol_error")
    assert "pwned" not in reply.text
    attacker.served_again(fresh_from=before)


@pytest.mark.parametrize("kind", ["exit", "segfault"])
def test_crash_is_502_and_the_next_request_gets_a_fresh_worker(guard: Guard, kind: str) -> None:
    attacker = guard.attacker(CRASH)
    before = attacker.warm()
    reply = attacker.attack(kind)
    assert (reply.status_code, reply.headers.get("x-ember-error")) == (502, "crashed")
    attacker.served_again(fresh_from=before)


def test_huge_responses_are_cut_at_the_limit(guard: Guard) -> None:
    attacker = guard.attacker(HUGE_RESPONSE)
    before = attacker.warm()
    limit = ATTACKER_LIMITS["max_response_bytes"]
    rss = process_rss_bytes(os.getpid())
    inline = attacker.attack("inline")
    assert (inline.status_code, inline.headers.get("x-ember-error")) == (
        502,
        "response_too_large",
    )
    received = 0
    with attacker.client.stream("GET", "/", headers={"x-attack": "stream"}) as streamed:
        try:
            for chunk in streamed.iter_bytes():
                received += len(chunk)
        except httpx.HTTPError:
            pass  # cut mid-body: no length to refuse it by before the status line went out
    assert received <= limit
    assert process_rss_bytes(os.getpid()) - rss < 2 * limit + (16 << 20)
    process = attacker.process()
    assert process is not None and process.pid == before.worker_pid  # cut, not killed
    assert wait_until(lambda: not process.inflight), "the endless body kept streaming"
    attacker.served_again()


def test_request_bodies_over_the_limit_are_refused(guard: Guard) -> None:
    attacker = guard.attacker(SLOW)
    attacker.warm()
    limit = ATTACKER_LIMITS["max_request_bytes"]
    declared = attacker.client.post("/", content=b"x" * (2 * limit), headers={"x-attack": "a"})
    assert (declared.status_code, declared.headers.get("x-ember-error")) == (
        413,
        "request_too_large",
    )

    def chunks():  # no content-length: counted as it streams
        for _ in range(2 * limit // (64 << 10)):
            yield b"x" * (64 << 10)

    streamed = attacker.client.post("/", content=chunks(), headers={"x-attack": "read-body"})
    assert (streamed.status_code, streamed.headers.get("x-ember-error")) == (
        413,
        "request_too_large",
    )
    attacker.served_again()


def test_slow_request_body_is_cut_at_the_wall_limit(guard: Guard) -> None:
    attacker = guard.attacker(SLOW)
    attacker.warm()
    host, port = attacker.client.base_url.host, attacker.client.base_url.port
    with socket.create_connection((host, port), timeout=10) as sock:
        head = (
            f"POST / HTTP/1.1\r\nhost: {host}\r\nx-test-deployment: {attacker.id}\r\n"
            "x-attack: read-body\r\ncontent-length: 1000\r\n\r\n"
        )
        sock.sendall(head.encode())
        started = time.monotonic()
        answer = b""
        while b"\r\n\r\n" not in answer and time.monotonic() - started < 8:
            sock.sendall(b"x")  # one byte at a time, never finishing
            sock.settimeout(0.2)
            try:
                answer += sock.recv(4096)
            except TimeoutError:
                continue
    assert answer.startswith(b"HTTP/1.1 504"), answer[:200]
    assert b"x-ember-error: wall_limit" in answer
    attacker.served_again()


def test_client_leaving_mid_stream_frees_the_request(guard: Guard) -> None:
    attacker = guard.attacker(SLOW)
    attacker.warm()
    with attacker.client.stream("GET", "/", headers={"x-attack": "stream"}) as streamed:
        for _ in streamed.iter_bytes():
            break  # read a little, then go away
    process = attacker.process()
    assert process is not None
    assert wait_until(lambda: not process.inflight), "the abandoned stream kept running"
    with pytest.raises(httpx.ReadTimeout):  # a slow handler, and a client that gives up
        attacker.client.get("/", headers={"x-attack": "sleep"}, timeout=0.3)
    assert wait_until(lambda: not process.inflight), "the abandoned request kept running"
    attacker.served_again()
