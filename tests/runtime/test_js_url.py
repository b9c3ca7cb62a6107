"""``from js import URL, URLSearchParams``: the JS classes Python Workers code reads a request's
query with (``URL.new(request.url).searchParams``), checked against what JS gives for the same
calls (the expected values are what ``new URL(...)`` / ``new URLSearchParams(...)`` return)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.runtime.isolate.jsurl import URL, URLSearchParams
from tests.runtime.harness import Harness, write_project


def test_url_parts_are_normalised_as_js_does() -> None:
    url = URL.new("HTTPS://User:pw@Example.COM:443/a b?x=1&y=2#frag")
    assert url.href == "https://User:pw@example.com/a%20b?x=1&y=2#frag"
    assert (url.protocol, url.host, url.hostname, url.port) == ("https:", "example.com",
                                                               "example.com", "")  # fmt: skip
    assert (url.pathname, url.search, url.hash) == ("/a%20b", "?x=1&y=2", "#frag")
    assert (url.origin, url.username, url.password) == ("https://example.com", "User", "pw")
    bare = URL.new("http://h:8080")
    assert (bare.href, bare.pathname, bare.port, bare.host) == ("http://h:8080/", "/", "8080",
                                                                "h:8080")  # fmt: skip
    assert (bare.search, bare.hash, str(bare), bare.toJSON()) == ("", "", bare.href, bare.href)
    assert URL.new("http://[::1]:9/x").host == "[::1]:9"


def test_relative_urls_resolve_against_a_base_and_garbage_is_a_type_error() -> None:
    assert URL.new("/p?q=1", "https://a.com/x/y").href == "https://a.com/p?q=1"
    assert URL.new("b", "https://a.com/x/y").href == "https://a.com/x/b"
    assert URL.new("b", URL.new("https://a.com/x/")).href == "https://a.com/x/b"
    for bad in ("not a url", "http://", "http://h:99999/"):
        with pytest.raises(TypeError, match="Invalid URL"):
            URL.new(bad)
    assert URL.canParse("https://a.com") and not URL.canParse("nope")


def test_search_params_read_and_serialise_as_js() -> None:
    params = URLSearchParams.new("?a=1&a=2&b=x+y%21&empty=")
    assert params.get("a") == "1" and params.getAll("a") == ["1", "2"]
    assert (params.get("b"), params.get("empty"), params.get("missing")) == ("x y!", "", None)
    assert params.has("a") and params.has("a", "2") and not params.has("a", "3")
    assert params.size == 4 and params.toString() == "a=1&a=2&b=x+y%21&empty="
    assert list(params.keys()) == ["a", "a", "b", "empty"]
    assert list(params.entries()) == [["a", "1"], ["a", "2"], ["b", "x y!"], ["empty", ""]]
    assert URLSearchParams.new({"q": "é~*", "t": True, "n": None}).toString() == (
        "q=%C3%A9%7E*&t=true&n=null"
    )
    assert str(URLSearchParams.new([["k", "v w"], ("k", 1)])) == "k=v+w&k=1"
    with pytest.raises(TypeError, match="two items"):
        URLSearchParams.new([["only-one"]])


def test_search_params_index_like_pyodide_proxies() -> None:
    # Pyodide gives a JS object with get/set/has/size a mapping's operators: params["k"] is
    # params.get("k") (None when missing), `in` is has(), len() is size, params["k"] = v is
    # set(). Cloudflare's CORS-proxy example reads url.searchParams["apiurl"].
    url = URL.new("https://w.dev/corsproxy/?apiurl=https%3A%2F%2Fa.com%2Fx&a=1&a=2")
    params = url.searchParams
    assert params["apiurl"] == "https://a.com/x"
    assert params["a"] == "1" and params["missing"] is None
    assert ("a" in params, "missing" in params, 3 in params) == (True, False, False)
    assert len(params) == 3
    # Such a mapping iterates as Pyodide's JsMap does: by keys (it prefers keys() over
    # [Symbol.iterator], the pairs), so dict() and items() pair each name with get(name).
    assert list(params) == ["apiurl", "a", "a"]
    assert dict(params) == {"apiurl": "https://a.com/x", "a": "1"}
    assert list(params.items())[1:] == [("a", "1"), ("a", "1")]
    params["a"] = "9"
    del params["apiurl"]
    assert url.search == "?a=9"


def test_search_params_edits_follow_js_rules() -> None:
    params = URLSearchParams.new("a=1&b=2&a=3")
    params.set("a", "9")
    assert params.toString() == "a=9&b=2"
    params.set("c", "new")
    params.append("a", "x")
    params.delete("b")
    assert params.toString() == "a=9&c=new&a=x"
    params.delete("a", "x")
    assert params.toString() == "a=9&c=new"
    unsorted = URLSearchParams.new("c=1&a=2&b=3&a=1")
    unsorted.sort()
    assert unsorted.toString() == "a=2&a=1&b=3&c=1"
    seen: list[tuple[str, str]] = []
    unsorted.forEach(lambda value, name, _: seen.append((name, value)))
    assert seen == [("a", "2"), ("a", "1"), ("b", "3"), ("c", "1")]


def test_search_params_are_live_on_their_url() -> None:
    url = URL.new("https://a.com/p?x=1#h")
    url.searchParams.append("z", "a b")
    assert (url.search, url.href) == ("?x=1&z=a+b", "https://a.com/p?x=1&z=a+b#h")
    url.searchParams.delete("x")
    url.searchParams.delete("z")
    assert (url.search, url.href) == ("", "https://a.com/p#h")
    url.search = "?k=v"
    assert url.searchParams.get("k") == "v" and url.href == "https://a.com/p?k=v#h"


def test_a_worker_imports_url_and_search_params_from_js(harness: Harness, tmp_path: Path) -> None:
    worker = """
    from js import URL, URLSearchParams
    from workers import Response

    async def on_fetch(request, env):
        url = URL.new(request.url)
        extra = URLSearchParams.new({"seen": url.searchParams.get("q")})
        return Response(f"{url.pathname} {url.searchParams.get('q')} {extra}")
    """
    deployment_id = harness.deploy(write_project(tmp_path / "w", worker))
    with harness.client(deployment_id) as client:
        assert client.get("/path?q=a+b").text == "/path a b seen=a+b"


@pytest.mark.parametrize(
    ("given", "href", "pathname", "search", "hash_"),
    [  # what new URL(given) gives in JS (the WHATWG parser)
        ("https://a.com/x/../y", "https://a.com/y", "/y", "", ""),
        ("https://a.com/a/./b/../../c/.", "https://a.com/c/", "/c/", "", ""),
        ("https://a.com/..", "https://a.com/", "/", "", ""),
        ("https://a.com/?q=a b#f g", "https://a.com/?q=a%20b#f%20g", "/", "?q=a%20b", "#f%20g"),
        ("https://a.com/?q='x'", "https://a.com/?q=%27x%27", "/", "?q=%27x%27", ""),
        ("http:/a.com/x", "http://a.com/x", "/x", "", ""),
        ("http:\\\\a.com\\p?x=\\y", "http://a.com/p?x=\\y", "/p", "?x=\\y", ""),
        ("https://a.com/?", "https://a.com/?", "/", "", ""),
        ("https://a.com/#", "https://a.com/#", "/", "", ""),
        (" https://a.com/p\tq\n ", "https://a.com/pq", "/pq", "", ""),
    ],
)
def test_the_parser_normalises_as_the_url_standard_does(
    given: str, href: str, pathname: str, search: str, hash_: str
) -> None:
    url = URL.new(given)
    assert (url.href, url.pathname, url.search, url.hash) == (href, pathname, search, hash_)


def test_a_host_with_a_forbidden_character_is_invalid() -> None:
    for bad in ("https://a b.com/", "https://a|b.com/", "https://a^b.com/"):
        with pytest.raises(TypeError, match="Invalid URL"):
            URL.new(bad)
