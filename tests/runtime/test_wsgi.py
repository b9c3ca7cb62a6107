"""WSGI apps served from a fetch handler (Python Workers' ``workers.wsgi``), through the real
supervisor and isolates."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project


def test_wsgi_app(harness: Harness, tmp_path: Path) -> None:
    worker = """
import json
from workers import WorkerEntrypoint, wsgi

class Body:
    def __init__(self, chunks):
        self.chunks = chunks
    def __iter__(self):
        return iter(self.chunks)
    def close(self):
        print("body closed")

def app(environ, start_response):
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    report = {key: environ[key] for key in ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING",
              "CONTENT_TYPE", "HTTP_X_ONE", "wsgi.url_scheme")}
    report["body"] = body.decode()
    report["who"] = environ["workers.env"].WHO
    start_response("202 Accepted Here", [("content-type", "application/json"),
                                          ("set-cookie", "a=1"), ("set-cookie", "b=2")])
    return Body([b"", json.dumps(report).encode()])

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await wsgi.fetch(app, request, self.env)
"""
    root = write_project(tmp_path / "wsgi", worker, "vars:\n  WHO: wsgi\n")
    deployment = harness.deploy(root)
    with harness.client(deployment) as client:
        response = client.put(
            "/caf%C3%A9?q=1",
            content=b"data",
            headers=[("content-type", "text/plain"), ("x-one", "1"), ("x-one", "2")],
        )
    assert (response.status_code, response.reason_phrase) == (202, "Accepted Here")
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.json() == {
        "REQUEST_METHOD": "PUT",
        "PATH_INFO": "/café".encode().decode("latin-1"),  # PEP 3333's native string
        "QUERY_STRING": "q=1",
        "CONTENT_TYPE": "text/plain",
        "HTTP_X_ONE": "1, 2",  # joined, as JS Headers iterate
        "wsgi.url_scheme": "http",
        "body": "data",
        "who": "wsgi",
    }
    harness.wait_for(lambda: "body closed" in harness.console(deployment))


def test_wsgi_generator_starts_response_lazily(harness: Harness, tmp_path: Path) -> None:
    worker = """
from workers import wsgi

def app(environ, start_response):
    def body():
        start_response("200 OK", [("content-type", "text/plain")])
        yield b"lazy "
        yield b"start"
    return body()

async def fetch(request, env, ctx):
    return await wsgi.fetch(app, request, env)
"""
    root = write_project(tmp_path / "lazy", worker)
    with harness.client(harness.deploy(root)) as client:
        assert client.get("/").text == "lazy start"


def test_wsgi_entrypoint_serves_every_request(harness: Harness, tmp_path: Path) -> None:
    # Cloudflare's Flask and Django pages end with `Default = wsgi.entrypoint(app)`: the same
    # as a WorkerEntrypoint whose fetch is `await wsgi.fetch(app, request, self.env)`.
    worker = """
import json
import wsgi as top_level_wsgi
from workers import WorkerEntrypoint, wsgi

def app(environ, start_response):
    report = {"path": environ["PATH_INFO"], "who": environ["workers.env"].WHO}
    start_response("200 OK", [("content-type", "application/json")])
    return [json.dumps(report).encode()]

assert top_level_wsgi.entrypoint is wsgi.entrypoint
Default = wsgi.entrypoint(app)
assert issubclass(Default, WorkerEntrypoint)
"""
    root = write_project(tmp_path / "wsgi-entry", worker, "vars:\n  WHO: flask-like\n")
    with harness.client(harness.deploy(root)) as client:
        response = client.get("/hello")
    assert response.status_code == 200
    assert response.json() == {"path": "/hello", "who": "flask-like"}
