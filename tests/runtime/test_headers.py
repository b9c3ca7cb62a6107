"""``Headers`` iteration as the Fetch standard defines it (names sorted, values combined)."""

from __future__ import annotations

from ember.runtime.isolate.headers import Headers


def test_entries_combine_repeated_names_as_js_iteration_does() -> None:
    # new Headers([["b","1"],["a","x"],["b","2"]]).entries() -> ["a","x"], ["b","1, 2"]
    headers = Headers([("b", "1"), ("a", "x"), ("B", "2")])
    assert headers.entries() == [("a", "x"), ("b", "1, 2")]


def test_entries_keep_each_set_cookie_apart() -> None:
    # Fetch's "sort and combine" never joins Set-Cookie: a joined cookie list is unparseable.
    headers = Headers()
    headers.append("set-cookie", "a=1; Path=/")
    headers.append("content-type", "text/plain")
    headers.append("Set-Cookie", "b=2, c")
    assert headers.entries() == [
        ("content-type", "text/plain"),
        ("set-cookie", "a=1; Path=/"),
        ("set-cookie", "b=2, c"),
    ]
    assert headers.get("set-cookie") == "a=1; Path=/, b=2, c"  # get() joins all, as in JS
    assert headers.getSetCookie() == ["a=1; Path=/", "b=2, c"]


def test_the_wire_form_keeps_every_pair_in_order() -> None:
    headers = Headers([("b", "1"), ("a", "x"), ("b", "2")])
    assert headers.to_list() == [("b", "1"), ("a", "x"), ("b", "2")]


def test_a_missing_name_reads_as_none_as_on_the_platform() -> None:
    # Python Workers hand handlers headers that answer None for a missing name: a JS Headers
    # proxy (Pyodide's JsProxy __getitem__ calls headers.get(), which is null) and the SDK's
    # workers.Request.headers (an http.client.HTTPMessage) alike. Cloudflare's own cookie
    # example is `SimpleCookie(request.headers["Cookie"] or "")`.
    headers = Headers({"Content-Type": "text/plain", "Cookie": "__uid=1"})
    assert headers["X-Missing"] is None
    assert headers["cookie"] == headers["COOKIE"] == "__uid=1"
    assert ("Cookie" in headers, "cookie" in headers, "X-Missing" in headers) == (True, True, False)
    assert 1 not in headers
    assert headers.get("X-Missing") is None
    assert headers.get("X-Missing", "fallback") == "fallback"
    assert list(headers) == ["content-type", "cookie"]
    assert len(headers) == 2
