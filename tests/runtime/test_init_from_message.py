"""``new Request(url, request)`` and ``new Response(body, response)``: JS reads a Request or a
Response given as the init dictionary for its members, so the new message copies the other's
method, headers, body and redirect (a request) or status, statusText and headers (a response).
Cloudflare's CORS-proxy example builds its subrequest and its answer this way."""

from __future__ import annotations

import asyncio

import pytest

from ember.runtime.isolate.api import Request, Response


def test_request_new_with_a_request_as_init_copies_it() -> None:
    original = Request.new(
        "https://worker.dev/corsproxy/",
        {"method": "POST", "headers": {"x-a": "1"}, "body": "payload", "redirect": "manual"},
    )
    copy = Request.new("https://api.example/demo", original)
    assert (copy.url, copy.method, copy.redirect) == ("https://api.example/demo", "POST", "manual")
    assert copy.headers["x-a"] == "1"
    copy.headers["Origin"] = "https://api.example"  # the copy has headers of its own
    assert original.headers["origin"] is None
    assert asyncio.run(copy.text()) == "payload"
    assert original.body_used  # its body went to the copy, as a JS stream would


def test_request_init_from_a_request_yields_to_explicit_options() -> None:
    original = Request("https://a.example/", method="PUT", headers={"x-a": "1"})
    copy = Request("https://b.example/", original, method="DELETE")
    assert (copy.method, copy.headers["x-a"]) == ("DELETE", "1")


def test_a_get_request_as_init_gives_no_body() -> None:
    copy = Request.new("https://b.example/", Request("https://a.example/"))
    assert (copy.method, copy.body) == ("GET", None)


def test_request_init_from_a_used_body_is_refused() -> None:
    original = Request("https://a.example/", method="POST", body="x")
    asyncio.run(original.text())
    with pytest.raises(TypeError, match="already been used"):
        Request.new("https://b.example/", original)


def test_response_new_with_a_response_as_init_copies_it() -> None:
    upstream = Response("upstream body", status=202, status_text="Queued", headers={"x-u": "1"})
    copy = Response.new(upstream.body, upstream)
    assert (copy.status, copy.statusText, copy.headers["x-u"]) == (202, "Queued", "1")
    copy.headers["Vary"] = "Origin"
    assert upstream.headers["vary"] is None
    assert asyncio.run(copy.text()) == "upstream body"
