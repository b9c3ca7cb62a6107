"""Slow-loris and connection floods against a real ``ember serve``, with small ``server:`` limits.

A walkthrough held 20,000 connections open with no token, each trickling a header line every
10 s: honest clients timed out and the log got a traceback per failed accept. Now the request
head has a deadline (408, or a silent close when nothing came), connections are capped in total
and per client address (429 / 503 at once), and failed accepts are one line per interval.

Clients pick their source address on 127.0.0.0/8 to play distinct hosts. Nothing asserts on
time: each waits with a generous deadline for the answer it should get.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ember.models.server.metrics import parse_prometheus
from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account

LIMITS = """\
server:
  head_timeout: 2s
  body_timeout: 2s
  keepalive_timeout: 2s
  max_connections: 16
  max_connections_per_address: 4
"""
PARTIAL_HEAD = b"GET /client/v4/accounts HTTP/1.1\r\nHost: x\r\n"
PATIENCE_S = 60.0  # how long a client waits for what it should get; never asserted on


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    state = tmp_path_factory.mktemp("slow") / "state"
    process = ServeProcess(state, BASE_CONFIG + LIMITS, "--metrics-port", "0")
    yield process
    process.stop()


def _port(serve: ServeProcess) -> int:
    return int(serve.url.rsplit(":", 1)[1])


def _connect(serve: ServeProcess, source: str) -> socket.socket:
    return socket.create_connection(
        ("127.0.0.1", _port(serve)), timeout=PATIENCE_S, source_address=(source, 0)
    )


def _read_all(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes (or PATIENCE_S passes)."""
    conn.settimeout(PATIENCE_S)
    reply = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


def _trickle_until_answered(conn: socket.socket) -> bytes:
    """The slow-loris client: a header line every 0.3 s until the server answers or closes."""
    conn.sendall(PARTIAL_HEAD)
    conn.settimeout(0.3)
    deadline = time.monotonic() + PATIENCE_S
    reply = b""
    while time.monotonic() < deadline:
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            try:
                conn.sendall(b"X-a: b\r\n")
            except OSError:
                break  # closed under us: what was answered is in reply
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        reply += chunk
    return reply


def _honest(serve: ServeProcess, token: str, source: str) -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=PATIENCE_S) as client:
        return client.get(
            serve.url + "/client/v4/accounts", headers={"authorization": f"Bearer {token}"}
        )


def test_a_head_that_never_ends_is_answered_408_and_closed(limited: ServeProcess) -> None:
    with _connect(limited, "127.0.0.2") as conn:
        reply = _trickle_until_answered(conn)
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply[:200]
    assert b"connection: close" in reply.lower()
    assert b"within 2 s (server.head_timeout)" in reply


def test_408s_are_logged_once_per_interval_and_counted_in_the_metrics(
    limited: ServeProcess,
) -> None:
    with _connect(limited, "127.0.0.8") as conn:
        assert _trickle_until_answered(conn).startswith(b"HTTP/1.1 408 ")
    account_id, token = permanent_account(limited, "trickler")
    head = (
        f"POST /client/v4/accounts/{account_id}/storage/kv/namespaces HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n"
    )
    with _connect(limited, "127.0.0.9") as conn:
        conn.sendall(head.encode() + b'{"title": ')  # then nothing: the body never ends
        reply = _read_all(conn)
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"server.body_timeout" in reply
    lines = ("refused requests (head timeout, 408): ", "refused requests (body timeout, 408): ")
    deadline = time.monotonic() + PATIENCE_S
    while not all(line in limited.output() for line in lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    for line in lines:
        assert "ember serve: " + line in limited.output(), limited.output()[-2000:]
    found = re.search(r"Metrics on (http://\S+/metrics)", limited.output())
    assert found, limited.output()
    samples = parse_prometheus(httpx.get(found.group(1), timeout=PATIENCE_S).text)
    assert samples['ember_http_refusals_total{status="408",reason="head_timeout"}'] >= 1
    assert samples['ember_http_refusals_total{status="408",reason="body_timeout"}'] >= 1


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(
    limited: ServeProcess,
) -> None:
    # No request began: a 408 there could be read as the answer to the one a client sends next.
    with _connect(limited, "127.0.0.3") as conn:
        assert _read_all(conn) == b""


def test_an_idle_kept_alive_connection_is_closed_after_its_answer(limited: ServeProcess) -> None:
    with _connect(limited, "127.0.0.4") as conn:
        conn.sendall(b"GET /client/v4/accounts HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = _read_all(conn)  # the answer, then the close once keepalive_timeout passed
    assert reply.startswith(b"HTTP/1.1 "), reply[:200]
    assert b"connection: close" not in reply.lower()  # kept alive, then closed for idling


def test_one_address_gets_its_share_and_others_are_still_answered(
    limited: ServeProcess,
) -> None:
    account_id, token = permanent_account(limited, "patient")
    slow = [_connect(limited, "127.0.0.5") for _ in range(4)]
    try:
        for conn in slow:
            conn.sendall(PARTIAL_HEAD)
        with _connect(limited, "127.0.0.5") as extra:
            refused = _read_all(extra)
        assert refused.startswith(b"HTTP/1.1 429 Too Many Requests\r\n"), refused[:200]
        assert b"server.max_connections_per_address" in refused
        # Another address is served while that one holds its share.
        honest = _honest(limited, token, "127.0.0.6")
        assert honest.status_code == 200, honest.text
        assert [a["id"] for a in honest.json()["result"]] == [account_id]
        # The held heads run out of time (408) and the address is served again.
        for conn in slow:
            assert _read_all(conn).startswith(b"HTTP/1.1 408 ")
        again = _honest(limited, token, "127.0.0.5")
        assert again.status_code == 200, again.text
    finally:
        for conn in slow:
            conn.close()


def test_past_the_total_cap_a_connection_is_answered_503(limited: ServeProcess) -> None:
    account_id, token = permanent_account(limited, "crowded")
    held = [_connect(limited, f"127.0.1.{n // 4 + 1}") for n in range(16)]
    try:
        # The listener accepts in arrival order: all 16 are counted before the next is judged.
        for conn in held:
            conn.sendall(PARTIAL_HEAD)
        with _connect(limited, "127.0.2.1") as extra:
            refused = _read_all(extra)
        assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), refused[:200]
        assert b"server.max_connections" in refused
    finally:
        for conn in held:
            conn.close()
    honest = _answered_soon(limited, token, "127.0.2.2")
    assert honest.status_code == 200 and honest.json()["result"][0]["id"] == account_id


def _answered_soon(serve: ServeProcess, token: str, source: str) -> httpx.Response:
    """An honest request, retried while the server has not yet seen the closes (503)."""
    deadline = time.monotonic() + PATIENCE_S
    while True:
        reply = _honest(serve, token, source)
        if reply.status_code != 503 or time.monotonic() > deadline:
            return reply
        time.sleep(0.1)


class _FewFiles(ServeProcess):
    """``ember serve`` under a small open-file limit, its connection cap set above it."""

    NOFILE = 256

    def start(self) -> None:
        self.prefix = ("prlimit", f"--nofile={self.NOFILE}:{self.NOFILE}", "--")
        super().start()


def test_failed_accepts_are_one_line_per_interval_not_a_traceback_each(
    tmp_path: Path,
) -> None:
    config = (
        BASE_CONFIG + "server: {max_connections: 100000, max_connections_per_address: 100000}\n"
    )
    serve = _FewFiles(tmp_path / "state", config)
    try:
        account_id, token = permanent_account(serve, "files")
        flood = []
        try:
            for _ in range(_FewFiles.NOFILE + 64):  # the kernel's backlog takes them
                flood.append(_connect(serve, "127.0.0.7"))
            deadline = time.monotonic() + PATIENCE_S
            while "could not accept" not in serve.output() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            for conn in flood:
                conn.close()
        honest = _answered_soon(serve, token, "127.0.0.8")
        assert honest.status_code == 200 and honest.json()["result"][0]["id"] == account_id
        log = serve.output()
        assert "could not accept connections (Too many open files): 1" in log, log[-2000:]
        assert "Traceback" not in log and log.count("Too many open files") <= 5, log[-2000:]
    finally:
        serve.stop()
