"""Cloudflare's own Python Workers examples (the docs' and the examples gallery's), in the shape
they are published, run unchanged: each test is one example's handler and what the platform
answers for it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.runtime.cf_docs import example
from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream

COOKIE_EXAMPLE = """
from http.cookies import SimpleCookie
from workers import Response

async def on_fetch(request):
    cookie_name = "__uid"
    cookies = SimpleCookie(request.headers["Cookie"] or "")
    if cookie_name in cookies:
        return Response(cookies[cookie_name].value)
    return Response("No cookie with name: " + cookie_name)
"""

READ_POST_EXAMPLE = """
from js import Object, Response, Headers, JSON

async def read_request_body(request):
    headers = request.headers
    content_type = headers["content-type"] or ""
    if "application/json" in content_type:
        return JSON.stringify(await request.json())
    if "form" in content_type:
        form = await request.formData()
        data = Object.fromEntries(form.entries())
        return JSON.stringify(data)
    return await request.text()

async def on_fetch(request):
    if "POST" in request.method:
        req_body = await read_request_body(request)
        return Response.new(f"The request body sent in was {req_body}")
    return Response.new("The request was not POST")
"""

# The gallery's CORS proxy (its demo page left out): the subrequest is `new Request(url,
# request)` and the answer `new Response(response.body, response)` with headers added; an
# OPTIONS preflight's handler is returned un-awaited from the async on_fetch.
CORS_EXAMPLE = """
from pyodide.ffi import to_js as _to_js
from js import Response, URL, fetch, Object, Request

def to_js(x):
    return _to_js(x, dict_converter=Object.fromEntries)

async def on_fetch(request):
    cors_headers = {
      "Access-Control-Allow-Origin": "*",
      "Access-Control-Allow-Methods": "GET,HEAD,POST,OPTIONS",
      "Access-Control-Max-Age": "86400",
    }
    api_url = "https://examples.cloudflareworkers.com/demos/demoapi"
    proxy_endpoint = "/corsproxy/"

    async def handle_request(request):
        url = URL.new(request.url)
        api_url2 = url.searchParams["apiurl"]
        if not api_url2:
            api_url2 = api_url
        request = Request.new(api_url2, request)
        request.headers["Origin"] = (URL.new(api_url2)).origin
        print(request.headers)
        response = await fetch(request)
        response = Response.new(response.body, response)
        response.headers["Access-Control-Allow-Origin"] = url.origin
        response.headers["Vary"] = "Origin"
        return response

    async def handle_options(request):
        if "Origin" in request.headers and "Access-Control-Request-Method" in request.headers and "Access-Control-Request-Headers" in request.headers:
            return Response.new(None, headers=to_js({
            **cors_headers,
            "Access-Control-Allow-Headers": request.headers["Access-Control-Request-Headers"]
          }))
        return Response.new(None, headers=to_js({"Allow": "GET, HEAD, POST, OPTIONS"}))

    url = URL.new(request.url)
    if url.pathname.startswith(proxy_endpoint):
        if request.method == "OPTIONS":
            return handle_options(request)
        if request.method in ("GET", "HEAD", "POST"):
            return await handle_request(request)
        return Response.new(None, status=405, statusText="Method Not Allowed")
    return Response.new("demo page", headers=to_js({"content-type": "text/html;charset=UTF-8"}))
"""  # noqa: E501 - the example's own long line, kept as published


def test_cookie_example_without_a_cookie_header(harness: Harness, tmp_path: Path) -> None:
    deployment = harness.deploy(write_project(tmp_path / "gal-cookie", COOKIE_EXAMPLE))
    with harness.client(deployment) as client:
        missing = client.get("/")
        present = client.get("/", headers={"Cookie": "a=b; __uid=u-1"})
    assert (missing.status_code, missing.text) == (200, "No cookie with name: __uid")
    assert (present.status_code, present.text) == (200, "u-1")


def test_read_post_example_with_and_without_a_content_type(
    harness: Harness, tmp_path: Path
) -> None:
    deployment = harness.deploy(write_project(tmp_path / "gal-read-post", READ_POST_EXAMPLE))
    with harness.client(deployment) as client:
        bare = client.post("/", content=b"plain words")  # no content-type at all
        posted = client.post("/", json={"a": 1})
        form = client.post("/", data={"k": "v"})
    assert (bare.status_code, bare.text) == (200, "The request body sent in was plain words")
    assert posted.text == 'The request body sent in was {"a":1}'
    assert form.text == 'The request body sent in was {"k":"v"}'


def test_cors_proxy_example_forwards_through_a_copied_request(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    deployment = harness.deploy(write_project(tmp_path / "gal-cors", CORS_EXAMPLE))
    target = f"{upstream.url}/echo"
    with harness.client(deployment) as client:
        posted = client.post("/corsproxy/", params={"apiurl": target}, json={"msg": "Hello world!"})
    assert posted.status_code == 200
    echoed = json.loads(posted.text)
    assert (echoed["method"], echoed["body"]) == ("POST", '{"msg":"Hello world!"}')
    assert echoed["headers"]["origin"] == upstream.url
    assert echoed["headers"]["content-type"] == "application/json"
    assert posted.headers["access-control-allow-origin"] == harness.url
    assert (posted.headers["vary"], posted.headers["x-upstream"]) == ("Origin", "1")


def test_cors_proxy_example_answers_a_preflight_returned_unawaited(
    harness: Harness, tmp_path: Path
) -> None:
    # `return handle_options(request)` in the async on_fetch: on the platform the handler's
    # promise adopts the coroutine it resolves to (a PyProxy of an awaitable is a thenable).
    deployment = harness.deploy(write_project(tmp_path / "gal-cors", CORS_EXAMPLE))
    preflight = {
        "Origin": "https://site.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    with harness.client(deployment) as client:
        full = client.options("/corsproxy/", headers=preflight)
        bare = client.options("/corsproxy/")
    assert full.status_code == 200, full.text
    assert full.headers["access-control-allow-headers"] == "content-type"
    assert full.headers["access-control-max-age"] == "86400"
    assert (bare.status_code, bare.headers["allow"]) == (200, "GET, HEAD, POST, OPTIONS")


def test_a_fetched_response_passed_through_keeps_its_length(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    # workerd sends a body of known length with its Content-Length (no chunking), whether the
    # fetched response is returned itself or its body is wrapped in a new Response.
    sources = {
        "fetch_html": {"https://example.com": f"{upstream.url}/echo"},
        "alter_headers": {"https://example.com": f"{upstream.url}/echo"},
        "respond_another_site": {"https://example.com": f"{upstream.url}/echo"},
    }
    for name, urls in sources.items():
        deployment = harness.deploy(write_project(tmp_path / name, example(name, **urls)))
        with harness.client(deployment) as client:
            reply = client.get("/")
        assert reply.status_code == 200, (name, reply.text)
        assert json.loads(reply.text)["path"] == "/echo"
        assert reply.headers.get("content-length") == str(len(reply.content)), name
        assert "transfer-encoding" not in reply.headers, name


def test_a_streamed_upstream_body_stays_chunked(
    harness: Harness, upstream: Upstream, tmp_path: Path
) -> None:
    source = example("fetch_html", **{"https://example.com": f"{upstream.url}/chunks?n=3"})
    deployment = harness.deploy(write_project(tmp_path / "stream", source))
    with harness.client(deployment) as client:
        reply = client.get("/")
    assert reply.status_code == 200 and "content-length" not in reply.headers
