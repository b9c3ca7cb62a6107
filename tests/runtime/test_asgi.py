"""ASGI apps served from a fetch handler (Python Workers' ``asgi``), through the real supervisor
and isolates. WSGI apps: test_wsgi.py."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.runtime.harness import Harness, write_project

RAW_ASGI_APP = """
import json

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["greeting"] = "hi"
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    report = {
        "method": scope["method"],
        "path": scope["path"],
        "raw_path": scope["raw_path"].decode("latin-1"),
        "query": scope["query_string"].decode("latin-1"),
        "scheme": scope["scheme"],
        "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]
                    if k.startswith(b"x-") and k != b"x-test-deployment"],
        "body": body.decode(),
        "who": scope["env"].WHO,
        "state": scope["state"],
    }
    await send({"type": "http.response.start", "status": 201, "headers": [
        (b"content-type", b"application/json"),
        (b"set-cookie", b"a=1"),
        (b"set-cookie", b"b=2"),
    ]})
    await send({"type": "http.response.body", "body": json.dumps(report).encode()})
"""


def test_raw_asgi_app_sees_the_request_and_env(harness: Harness, tmp_path: Path) -> None:
    worker = (
        RAW_ASGI_APP
        + """
import asgi
from workers import WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await asgi.fetch(app, request.js_object, self.env)
"""
    )
    root = write_project(tmp_path / "raw-asgi", worker, "vars:\n  WHO: asgi\n")
    with harness.client(harness.deploy(root)) as client:
        response = client.post(
            "/caf%C3%A9/a%2Fb?x=1&y=%20",
            content=b"payload",
            headers=[("x-one", "1"), ("x-one", "2"), ("x-latin", "caf\xe9".encode("latin-1"))],
        )
    assert response.status_code == 201
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.json() == {
        "method": "POST",
        "path": "/café/a/b",
        "raw_path": "/caf%C3%A9/a%2Fb",
        "query": "x=1&y=%20",
        "scheme": "http",
        # joined and sorted by name, as JS Headers iterate (the Fetch standard)
        "headers": [["x-latin", "caf\xe9"], ["x-one", "1, 2"]],
        "body": "payload",
        "who": "asgi",
        "state": {"greeting": "hi"},
    }


def test_entrypoint_and_workers_submodules(harness: Harness, tmp_path: Path) -> None:
    worker = (
        RAW_ASGI_APP
        + """
from workers import asgi, wsgi
import workers.asgi

assert workers.asgi.fetch is asgi.fetch and callable(wsgi.fetch)
Default = asgi.entrypoint(app)
"""
    )
    root = write_project(tmp_path / "entry", worker, "vars:\n  WHO: entry\n")
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/x")
    assert (response.status_code, response.json()["who"], response.json()["path"]) == (
        201,
        "entry",
        "/x",
    )


def test_lifespan_runs_around_each_request(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asgi
from workers import WorkerEntrypoint

EVENTS = []

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            EVENTS.append(message["type"])
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": ",".join(EVENTS).encode()})

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await asgi.fetch(app, request, self.env)
"""
    root = write_project(tmp_path / "lifespan", worker)
    with harness.client(harness.deploy(root)) as client:
        first = client.get("/").text
        second = client.get("/").text
    assert first == "lifespan.startup"
    assert second == "lifespan.startup,lifespan.shutdown,lifespan.startup"


def test_app_without_lifespan_support_is_served(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asgi

async def app(scope, receive, send):
    assert scope["type"] == "http", "this app speaks http only"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"plain"})

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "nolifespan", worker)
    with harness.client(harness.deploy(root)) as client:
        assert client.get("/").text == "plain"


def test_failed_startup_is_the_handlers_error(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asgi

async def app(scope, receive, send):
    await receive()
    await send({"type": "lifespan.startup.failed", "message": "database unreachable"})

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "failed", worker)
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/", headers={"accept": "text/plain"})
    assert response.status_code == 500
    assert "database unreachable" in response.text


def test_streamed_body_reaches_the_client_in_parts(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asyncio
import asgi

async def app(scope, receive, send):
    if scope["type"] != "http":
        raise RuntimeError("no lifespan")
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    for n in range(3):
        await send({"type": "http.response.body", "body": f"data: {n}\\n\\n".encode(),
                    "more_body": True})
        await asyncio.sleep(0.2)
    await send({"type": "http.response.body", "body": b"", "more_body": False})

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "stream", worker)
    with harness.client(harness.deploy(root)) as client:
        with client.stream("GET", "/") as response:
            parts = [part for part in response.iter_raw() if part]
    assert response.headers["content-type"] == "text/event-stream"
    assert parts == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]


def test_error_mid_stream_cuts_the_body(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asgi

async def app(scope, receive, send):
    if scope["type"] != "http":
        raise RuntimeError("no lifespan")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"first", "more_body": True})
    raise ValueError("broke mid-stream")

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "midstream", worker)
    with harness.client(harness.deploy(root)) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            with client.stream("GET", "/") as response:
                for _ in response.iter_raw():
                    pass


def test_app_that_sends_no_response(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asgi

async def app(scope, receive, send):
    if scope["type"] != "http":
        raise RuntimeError("no lifespan")

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "silent", worker)
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/", headers={"accept": "text/plain"})
    assert response.status_code == 500
    assert "did not generate a response" in response.text


def test_starlette_app_with_background_task(harness: Harness, tmp_path: Path) -> None:
    worker = """
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route
import asgi

DONE = []

def finish(name):
    DONE.append(name)
    print(f"background {name}")

async def hello(request):
    return JSONResponse({"name": request.path_params["name"],
                         "who": request.scope["env"].WHO,
                         "done": DONE},
                        background=BackgroundTask(finish, request.path_params["name"]))

async def numbers(request):
    async def count():
        for n in range(int(request.query_params["n"])):
            yield f"{n}\\n"
    return StreamingResponse(count(), media_type="text/plain")

async def broken(request):
    raise ValueError("route broke")

async def echo(request):
    return PlainTextResponse((await request.body()).upper(), status_code=202)

app = Starlette(routes=[Route("/hello/{name}", hello), Route("/numbers", numbers),
                        Route("/echo", echo, methods=["POST"]), Route("/broken", broken)])

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "starlette", worker, "vars:\n  WHO: starlette\n")
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        assert client.get("/hello/ann").json() == {"name": "ann", "who": "starlette", "done": []}
        # The background task runs after the response was sent (ctx.wait_until).
        harness.wait_for(lambda: "background ann" in harness.console(deployment))
        assert client.get("/hello/bob").json()["done"] == ["ann"]
        assert client.get("/numbers", params={"n": 4}).text == "0\n1\n2\n3\n"
        echoed = client.post("/echo", content=b"shout")
        assert (echoed.status_code, echoed.text) == (202, "SHOUT")
        assert client.get("/missing").status_code == 404
        assert client.delete("/echo").status_code == 405
        # Starlette's error middleware answers 500 and re-raises: its answer goes out (as
        # under uvicorn) and the traceback reaches the log.
        broken = client.get("/broken")
        assert (broken.status_code, broken.text) == (500, "Internal Server Error")
    harness.wait_for(lambda: "ValueError: route broke" in harness.console(deployment))


def test_client_leaving_a_stream_stops_the_app(harness: Harness, tmp_path: Path) -> None:
    worker = """
import asyncio
import asgi

async def app(scope, receive, send):
    if scope["type"] != "http":
        raise RuntimeError("no lifespan")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    sent = 0
    try:
        while True:
            await send({"type": "http.response.body", "body": b"tick\\n", "more_body": True})
            sent += 1
            await asyncio.sleep(0.01)
    except OSError as error:
        print(f"stopped: {type(error).__name__}")

async def fetch(request, env, ctx):
    return await asgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "endless", worker)
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        with client.stream("GET", "/") as response:
            lines = response.iter_lines()
            assert [next(lines), next(lines)] == ["tick", "tick"]
    harness.wait_for(lambda: "stopped: ClientDisconnected" in harness.console(deployment))
