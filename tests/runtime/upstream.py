"""A real upstream for subrequest tests: a small ASGI app under uvicorn on 127.0.0.1.

Routes: ``/echo`` (method, path, query, headers and body back as JSON, plus a cookie),
``/text?body=B&type=T`` (B as a T),
``/redirect?to=PATH`` (302), ``/chunks?n=N`` (N streamed chunks), ``/big?n=BYTES``,
``/status/CODE``, ``/gzip?body=B&n=N`` (B repeated N times, or ``random=N`` bytes that do
not compress, sent gzip-encoded with its length; ``members=M``: as M concatenated gzip
members; ``coding=br``: brotli-encoded instead; ``status=204``/``304`` or ``empty=1``: the
header and no body), ``/hold?key=K``
(answers once ``/release?key=K`` was requested), and
``/never`` (answers only when the client goes away) and ``/trickle`` (a head and one chunk, then
nothing until the client goes away); ``gone`` counts those departures.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import random
import threading
from typing import Any
from urllib.parse import parse_qs

import brotli
import uvicorn

Scope = dict[str, Any]


class Upstream:
    """Start with ``Upstream()``; ``url`` is its origin; ``close()`` stops it."""

    def __init__(self) -> None:
        self.held: set[str] = set()  # /hold keys waiting now
        self.seen: list[str] = []  # paths requested, in order
        self.gone = 0  # /never and /trickle requests whose client went away
        self._gates: dict[str, asyncio.Event] = {}
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=0,
            log_level="error",
            lifespan="off",
            interface="asgi3",
            ws="none",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="upstream", daemon=True)
        self._thread.start()
        while not self._server.started:
            threading.Event().wait(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def _gate(self, key: str) -> asyncio.Event:
        return self._gates.setdefault(key, asyncio.Event())

    async def app(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope["path"]
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        self.seen.append(path)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if path == "/echo":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            document = {
                "method": scope["method"],
                "path": path,
                "query": query,
                "headers": headers,
                "body": body.decode("utf-8", "replace") if len(body) < 4096 else "",
                "length": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
            extra = [(b"set-cookie", b"flavour=oat; Path=/"), (b"x-upstream", b"1")]
            await _reply(send, 200, json.dumps(document).encode(), extra, b"application/json")
        elif path == "/text":  # a body and content type the query names
            kind = query.get("type", "text/plain").encode()
            await _reply(
                send, 200, query.get("body", "").encode(), [(b"x-powered-by", b"up")], kind
            )
        elif path == "/redirect":
            location = query.get("to", "/echo").encode()
            await _reply(send, int(query.get("code", "302")), b"", [(b"location", location)])
        elif path == "/chunks":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for i in range(int(query.get("n", "3"))):
                chunk = f"chunk-{i};".encode()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await asyncio.sleep(0.01)  # separate chunks on the wire
            await send({"type": "http.response.body", "body": b""})
        elif path == "/gzip":  # an origin that compresses: content-encoding and its length
            plain = query.get("body", "").encode() * int(query.get("n", "1"))
            if "random" in query:
                plain = random.Random(0).randbytes(int(query["random"]))
            encoded = gzip.compress(plain, mtime=0)
            if "members" in query:  # ``cat a.gz b.gz``: the body split over N gzip members
                n = int(query["members"])
                cuts = [len(plain) * i // n for i in range(n + 1)]
                parts = [plain[cuts[i] : cuts[i + 1]] for i in range(n)]
                encoded = b"".join(gzip.compress(part, mtime=0) for part in parts)
            status = int(query.get("status", "200"))
            if status in (204, 304) or "empty" in query:
                encoded = b""  # the header with no body (as a HEAD's answer has none either)
            coding = query.get("coding", "gzip").encode()
            if coding == b"br":  # the same body brotli-encoded instead
                encoded = brotli.compress(plain) if encoded else b""
            extra = [(b"content-encoding", coding), (b"vary", b"accept-encoding")]
            await _reply(send, status, encoded, extra, b"text/plain")
        elif path == "/big":
            await _reply(send, 200, b"b" * int(query.get("n", "1000")))
        elif path.startswith("/status/"):
            await _reply(send, int(path.rsplit("/", 1)[1]), b"status body")
        elif path == "/hold":
            key = query["key"]
            self.held.add(key)
            try:
                await asyncio.wait_for(self._gate(key).wait(), 60)
            finally:
                self.held.discard(key)
            await _reply(send, 200, f"released {key}".encode())
        elif path == "/release":
            self._gate(query["key"]).set()
            await _reply(send, 200, f"opened {query['key']}".encode())
        elif path == "/trickle":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.gone += 1
        elif path == "/never":
            while (await receive())["type"] != "http.disconnect":
                pass
            self.gone += 1
        else:
            await _reply(send, 404, b"no such route")


async def _reply(
    send: Any,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes = b"text/plain",
) -> None:
    length = str(len(body)).encode()  # as most servers announce a body they hold whole
    head = [(b"content-type", content_type), (b"content-length", length), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def ask_worker(harness: Any, deployment_id: str, upstream: Upstream, route: str) -> Any:
    """GET ``/ROUTE`` of a deployed worker that calls ``upstream`` (its ``x-upstream`` header);
    the worker's JSON answer (a ``tests.runtime.harness.Harness`` deployment)."""
    with harness.client(deployment_id, timeout=60) as client:
        response = client.get(f"/{route}", headers={"x-upstream": upstream.url})
    assert response.status_code == 200, response.text
    return response.json()


def raw_answer(
    harness: Any, deployment_id: str, upstream: Upstream, path: str, accept_encoding: str
) -> tuple[dict[str, str], bytes]:
    """GET ``path`` of a deployed worker that calls ``upstream``, from a client that accepts
    ``accept_encoding``: the head and the bytes on the wire, undecoded (as curl without
    ``--compressed`` sees them)."""
    headers = {"x-upstream": upstream.url, "accept-encoding": accept_encoding}
    with harness.client(deployment_id) as client:
        with client.stream("GET", path, headers=headers) as response:
            return dict(response.headers), b"".join(response.iter_raw())
