"""``ember models serve`` gives a request body the runtime's deadline (``bodyclock.py``).

A client that announced a body and trickled it held a connection and a request task of the
model server for ever: the pool's replica on loopback, and a user-facing command. A real server
process with ``--body-timeout 2`` (and a rate too high for a trickle to earn time) answers such
a client 408 and closes; an honest request is served as before. The client is a raw socket;
nothing asserts on time.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx

from tests.models.server.served_process import served_process

PATIENCE_S = 60.0  # how long the client waits for what it should get; never asserted on
HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000\r\n\r\n"
)


def _trickle_until_answered(port: int) -> bytes:
    """The head, then one body byte every 0.3 s until the server answers or closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S) as conn:
        conn.sendall(HEAD + b"{")
        conn.settimeout(0.3)
        deadline = time.monotonic() + PATIENCE_S
        reply = b""
        while time.monotonic() < deadline:
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                try:
                    conn.sendall(b" ")
                except OSError:
                    break  # closed under us: what was answered is in reply
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
        return reply


def test_a_trickled_body_is_answered_408_and_an_honest_one_served(glm_dir: Path) -> None:
    flags = ("--body-timeout", "2", "--body-min-rate", "1GiB")
    with served_process(glm_dir, "glm", *flags) as served:
        port = int(served.url.rsplit(":", 1)[1])
        reply = _trickle_until_answered(port)
        assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:300]
        assert b"connection: close" in reply.lower()
        assert b"within 2 s" in reply and b"--body-timeout" in reply, reply
        answered = httpx.post(
            served.url + "/v1/chat/completions",
            json={"model": "glm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
            timeout=PATIENCE_S,
        )
        assert answered.status_code == 200, answered.text
        deadline = time.monotonic() + PATIENCE_S
        line = "ember models serve: refused requests (body timeout, 408): 1"
        while not any(line in logged for logged in served.log) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any(line in logged for logged in served.log), served.log[-20:]
