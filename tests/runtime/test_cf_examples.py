"""Cloudflare's own Python Workers examples (the docs' and the examples gallery's), in the shape
they are published, run unchanged: each test is one example's handler and what the platform
answers for it."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.harness import Harness, write_project

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
