"""The caller's ``X-Request-Id`` names the answer (vLLM's ``_base_request_id``: ``chatcmpl-ID``,
``cmpl-ID``) without becoming the engine's request id, so two callers sending the same one
never collide; and ``/get_server_info`` reports the port the server is bound to, also after
``--port 0``."""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import openai

from tests.models.server.live import LiveServer

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
COMPLETION = {"prompt": "def f(", "max_tokens": 3}


def _ids(live: LiveServer, path: str, body: dict, headers: dict) -> list[str]:
    url = live.url + path
    if not body.get("stream"):
        reply = httpx.post(url, json=body, headers=headers, timeout=120)
        assert reply.status_code == 200, reply.text
        return [reply.json()["id"]]
    reply = httpx.post(url, json=body, headers=headers, timeout=120)
    assert reply.status_code == 200, reply.text
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: {")]
    return [json.loads(item)["id"] for item in data]


def test_x_request_id_names_chat_and_completion_answers(kimi: LiveServer) -> None:
    header = {"X-Request-Id": "walk-11.a"}
    for path, body, prefix in (
        ("/v1/chat/completions", CHAT, "chatcmpl-"),
        ("/v1/completions", COMPLETION, "cmpl-"),
    ):
        for stream in (False, True):
            ids = _ids(kimi, path, body | {"stream": stream}, header)
            assert ids and set(ids) == {prefix + "walk-11.a"}, (path, stream, ids)
        plain = {_ids(kimi, path, body, {})[0] for _ in range(2)}
        assert len(plain) == 2 and all(i.startswith(prefix) for i in plain)


def test_the_same_x_request_id_twice_at_once_is_two_answers(kimi: LiveServer) -> None:
    header = {"X-Request-Id": "same"}
    body = CHAT | {"max_tokens": 8, "ignore_eos": True}
    with ThreadPoolExecutor(2) as pool:
        ids = list(pool.map(lambda _: _ids(kimi, "/v1/chat/completions", body, header), range(2)))
    assert ids == [["chatcmpl-same"], ["chatcmpl-same"]]


def test_server_info_reports_the_bound_port(kimi: LiveServer) -> None:
    assert kimi.state.settings.port == 0  # the test server asked for any free port
    info = httpx.get(kimi.url + "/get_server_info", timeout=60).json()
    assert info["port"] == urlsplit(kimi.url).port


def test_every_answer_carries_x_request_id_as_vllms_does(kimi: LiveServer) -> None:
    """vLLM's XRequestIdMiddleware answers ``X-Request-Id``: the caller's, else a fresh uuid4
    hex; openai-node (6.49, src/core/api-promise.ts) and the Python client read ``_request_id``
    from it, pointed straight at a model server too."""
    url = kimi.url + "/v1/chat/completions"
    for stream in (False, True):
        sent = httpx.post(url, json=CHAT | {"stream": stream}, headers={"X-Request-Id": "gw-7"})
        assert sent.status_code == 200 and sent.headers["x-request-id"] == "gw-7"
    fresh = [httpx.post(url, json=CHAT, timeout=120).headers["x-request-id"] for _ in range(2)]
    assert fresh[0] != fresh[1] and all(len(i) == 32 and int(i, 16) >= 0 for i in fresh)
    # A header the server would not log (not a plain token) is not echoed either.
    odd = httpx.post(url, json=CHAT, headers={"X-Request-Id": "a b"}, timeout=120)
    assert odd.headers["x-request-id"] != "a b" and len(odd.headers["x-request-id"]) == 32
    # Errors carry one too (the client reads it into APIError.request_id).
    bad = httpx.post(url, json={"messages": 3}, headers={"X-Request-Id": "gw-8"}, timeout=120)
    assert bad.status_code == 400 and bad.headers["x-request-id"] == "gw-8"
    client = openai.OpenAI(base_url=kimi.url + "/v1", api_key="unused", max_retries=0)
    assert client.chat.completions.create(model="kimi", **CHAT)._request_id


def test_a_pipelined_request_does_not_inherit_the_callers_id_before_it(kimi: LiveServer) -> None:
    """uvicorn starts a pipelined request's task inside the one before it, so a context the
    middleware set only when the header was there leaked into the next request's answer id."""
    parts = urlsplit(kimi.url)
    body = json.dumps(CHAT).encode()

    def request(extra: bytes) -> bytes:
        return (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\ncontent-type: application/json\r\n"
            + extra
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )

    with socket.create_connection((parts.hostname, parts.port), timeout=120) as conn:
        conn.sendall(request(b"x-request-id: tenant-a\r\n") + request(b""))
        data = b""
        while data.count(b'"id":') < 2:
            chunk = conn.recv(65536)
            assert chunk, data
            data += chunk
    ids = [json.loads(part.split(b"\r\n\r\n", 1)[1])["id"] for part in _answers(data)]
    assert ids[0] == "chatcmpl-tenant-a"
    assert ids[1] != "chatcmpl-tenant-a" and ids[1].startswith("chatcmpl-"), ids


def _answers(data: bytes) -> list[bytes]:
    """Two HTTP/1.1 answers with content-length bodies, split."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        out.append(head + b"\r\n\r\n" + rest[:length])
        data = rest[length:]
    return out
