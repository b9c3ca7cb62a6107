"""Request/Response details a Workers user relies on: what the Fetch standard refuses, and what
the platform hands every request (``request.cf``), checked through a real isolate."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from ember.runtime.events import RequestEvent
from tests.runtime.harness import HEADER, Harness, write_project

RESPONSES = """
from workers import Headers, Response

async def fetch(request, env, ctx):
    kind = request.headers.get("x-kind")
    try:
        if kind == "204-body":
            return Response("gone", status=204)
        if kind == "304-json":
            return Response.json({"a": 1}, status=304)
        if kind == "crlf":
            return Response("x", headers={"x-user": "a\\r\\nset-cookie: evil=1"})
        if kind == "bad-name":
            Headers().append("x(y)", "1")
        if kind == "not-a-byte":
            return Response("x", headers={"x-price": "5€"})
        if kind == "redirect":
            return Response.redirect(request.headers.get("x-to"))
        if kind == "status-text":
            return Response("x", status=418, status_text=request.headers.get("x-text"))
        if kind == "status-text-crlf":
            return Response("x", status=418, status_text="a\\r\\nset-cookie: evil=1")
        if kind == "status-text-tab":
            return Response.new("x", {"status": 418, "statusText": "a\\tb"})
    except TypeError as exc:
        return Response(f"TypeError: {exc}", status=400)
    if kind == "padded":
        return Response("x", headers={"x-padded": "  value\\t"})
    if kind == "204":
        return Response(None, status=204)
    return Response("next")
"""


def test_null_body_status_with_a_body_is_refused(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "nullbody", RESPONSES)
    with harness.client(harness.deploy(root)) as client:
        for kind in ("204-body", "304-json"):
            response = client.get("/", headers={"x-kind": kind})
            assert response.status_code == 400, kind
            assert "Response with null body status cannot have body" in response.text


def test_204_without_body_keeps_the_connection_usable(harness: Harness, tmp_path: Path) -> None:
    # Two pipelined requests on one connection: a body after the 204 head would be read as the
    # start of the second response.
    deployment_id = harness.deploy(write_project(tmp_path / "pipelined", RESPONSES))
    host, port = harness.url.removeprefix("http://").rsplit(":", 1)
    head = f"GET / HTTP/1.1\r\nhost: x\r\n{HEADER}: {deployment_id}\r\n"
    with socket.create_connection((host, int(port)), timeout=20) as conn:
        conn.sendall(f"{head}x-kind: 204\r\n\r\n{head}connection: close\r\n\r\n".encode())
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    first, _, second = received.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 204 ")
    assert second.startswith(b"HTTP/1.1 200 ") and second.endswith(b"next")


def test_invalid_header_values_raise_where_they_are_set(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "headers", RESPONSES)
    with harness.client(harness.deploy(root)) as client:
        crlf = client.get("/", headers={"x-kind": "crlf"})
        bad_name = client.get("/", headers={"x-kind": "bad-name"})
        wide = client.get("/", headers={"x-kind": "not-a-byte"})
        padded = client.get("/", headers={"x-kind": "padded"})
    assert (crlf.status_code, "set-cookie" in crlf.headers) == (400, False)
    assert crlf.text.startswith("TypeError: Invalid header value")
    assert bad_name.text.startswith("TypeError: Invalid header name")
    assert wide.text.startswith("TypeError: Invalid header value") and "'€'" in wide.text
    assert padded.headers["x-padded"] == "value"  # normalized, as Fetch does


def test_request_cf_answers_attribute_access(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "cf",
        """
        from workers import Request, Response, WorkerEntrypoint

        class Default(WorkerEntrypoint):
            async def fetch(self, request):
                cf = request.cf
                made = Request("https://example.com", cf={"cacheTtl": 5})
                return Response.json({
                    "country": cf.country, "colo": cf["colo"],
                    "protocol": cf.httpProtocol, "rtt": cf.clientTcpRtt,
                    "tls": cf.tlsClientAuth.certPresented,
                    "made": made.cf.cacheTtl,
                })
        """,
    )
    with harness.client(harness.deploy(root)) as client:
        answer = client.get("/").json()
    assert answer["protocol"] == "HTTP/1.1" and answer["rtt"] == 0
    assert isinstance(answer["country"], str) and isinstance(answer["colo"], str)
    assert (answer["tls"], answer["made"]) == ("0", 5)


FORMS = """
from workers import FormData, Response

async def fetch(request, env, ctx):
    try:
        form = await request.form_data()
    except TypeError as exc:
        return Response(f"TypeError: {exc}", status=400)
    upload = form.get("upload")
    return Response.json({
        "name": form.get("name"), "tags": form.get_all("tag"), "empty": form.get("empty"),
        "missing": form.get("missing"), "keys": list(form),
        "file": None if upload is None else [upload.name, upload.type, await upload.text()],
        "made": FormData.new().has("x"),
    })
"""


def test_form_data_parses_both_form_encodings(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "forms", FORMS)
    with harness.client(harness.deploy(root)) as client:
        urlencoded = client.post("/", data={"name": "Zoë & co", "tag": ["a", "b"], "empty": ""})
        multipart = client.post(
            "/",
            data={"name": "ember", "tag": "x"},
            files={"upload": ("notes.txt", b"line one\n", "text/plain")},
        )
        not_a_form = client.post("/", json={"name": "x"})
    assert urlencoded.json() == {
        "name": "Zoë & co",
        "tags": ["a", "b"],
        "empty": "",
        "missing": None,
        "keys": ["name", "tag", "empty"],
        "file": None,
        "made": False,
    }
    answer = multipart.json()
    assert (answer["name"], answer["tags"]) == ("ember", ["x"])
    assert answer["file"] == ["notes.txt", "text/plain", "line one\n"]
    assert not_a_form.status_code == 400
    assert "FormData can only parse the following MIME types" in not_a_form.text
    assert "application/json" in not_a_form.text


def test_a_stream_that_fails_midway_is_still_logged(harness: Harness, tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "midstream",
        """
        from workers import Response

        async def fetch(request, env, ctx):
            async def body():
                yield "first part\\n"
                raise ValueError("failed mid-stream")
            return Response(body())
        """,
    )
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client, client.stream("GET", "/cut") as response:
        assert response.status_code == 200
        try:
            response.read()
        except httpx.HTTPError:
            pass  # the connection is cut, so the client does not take the body as complete
    harness.wait_for(lambda: bool(harness.of_type(RequestEvent, deployment_id)))
    (event,) = harness.of_type(RequestEvent, deployment_id)
    assert (event.method, event.url.endswith("/cut"), event.outcome) == ("GET", True, "exception")


def test_redirect_needs_an_absolute_url_as_workers_does(harness: Harness, tmp_path: Path) -> None:
    # workerd's Response.redirect: "TypeError: Unable to parse URL: <url>" for a relative URL.
    with harness.client(harness.deploy(write_project(tmp_path / "redir", RESPONSES))) as client:
        for relative in ("/login", "login", "//host-only"):
            refused = client.get("/", headers={"x-kind": "redirect", "x-to": relative})
            assert refused.status_code == 400, relative
            assert refused.text == f"TypeError: Unable to parse URL: {relative}"
        ok = client.get("/", headers={"x-kind": "redirect", "x-to": "https://example.com/login"})
        assert ok.status_code == 302 and ok.headers["location"] == "https://example.com/login"


def _status_line(harness: Harness, deployment_id: str, kind: str, text: str = "") -> bytes:
    host, port = harness.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as conn:
        conn.sendall(
            f"GET / HTTP/1.1\r\nhost: x\r\n{HEADER}: {deployment_id}\r\nx-kind: {kind}\r\n"
            f"x-text: {text}\r\nconnection: close\r\n\r\n".encode()
        )
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    return received.partition(b"\r\n")[0]


def test_the_handlers_status_text_is_the_status_line_s(harness: Harness, tmp_path: Path) -> None:
    # Workers sends the handler's statusText as the reason phrase (UTF-8, as workerd writes it);
    # without one, the standard phrase.
    deployment_id = harness.deploy(write_project(tmp_path / "statustext", RESPONSES))
    teapot = _status_line(harness, deployment_id, "status-text", "I'm a teapot")
    assert teapot == b"HTTP/1.1 418 I'm a teapot"
    assert _status_line(harness, deployment_id, "204") == b"HTTP/1.1 204 No Content"


def test_a_status_text_with_control_characters_is_refused(harness: Harness, tmp_path: Path) -> None:
    # workerd: "TypeError: Invalid statusText" for any character below 0x20 (header injection).
    root = write_project(tmp_path / "badstatustext", RESPONSES)
    with harness.client(harness.deploy(root)) as client:
        for kind in ("status-text-crlf", "status-text-tab"):
            response = client.get("/", headers={"x-kind": kind})
            assert (response.status_code, "set-cookie" in response.headers) == (400, False), (
                response.text
            )
            assert response.text == "TypeError: Invalid statusText", kind


STATUS_TEXTS = """
import json
from workers import Response

async def fetch(request, env, ctx):
    made = {
        "200": Response("x"),
        "404": Response("x", status=404),
        "299": Response("x", status=299),
        "new-503": Response.new("x", {"status": 503}),
        "json-201": Response.json({}, status=201),
        "given": Response("x", status=404, status_text="Nope"),
        "given-empty": Response.new("x", {"status": 404, "statusText": ""}),
        "redirect": Response.redirect("https://example.com/", 301),
        "clone-418": Response("x", status=418).clone(),
    }
    return Response(json.dumps({k: [r.statusText, r.status_text] for k, r in made.items()}))
"""


def test_status_text_without_one_given_reads_the_standard_phrase(
    harness: Harness, tmp_path: Path
) -> None:
    # workerd's Response::getStatusText(): the statusText given (even ""), else
    # defaultStatusText(status): the RFC 7231 phrase, or the class name ("Successful", ...)
    # for a code it does not know. A constructed Response is no exception.
    with harness.client(harness.deploy(write_project(tmp_path / "texts", STATUS_TEXTS))) as client:
        read = {k: v[0] for k, v in client.get("/").json().items()}
        aliases = {k: v[1] for k, v in client.get("/").json().items()}
    assert read == {
        "200": "OK",
        "404": "Not Found",
        "299": "Successful",
        "new-503": "Service Unavailable",
        "json-201": "Created",
        "given": "Nope",
        "given-empty": "",
        "redirect": "Moved Permanently",
        "clone-418": "I'm a teapot",
    }
    assert aliases == read
