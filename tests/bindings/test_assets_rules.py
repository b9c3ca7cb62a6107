"""``_redirects``, ``_headers`` and ``Range`` on real files: the parsers on tricky lines (as
workers-shared's parsers read them), then what the assets answer with the rules applied."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ember.bindings.assets.files import AssetDirectory
from ember.bindings.assets.rule_files import parse_headers, parse_redirects
from ember.bindings.assets.rule_source import LiveRules
from ember.bindings.assets.rules import AssetRules, rules_of
from ember.bindings.assets.serving import AssetAnswer, AssetsPolicy, answer, route


def test_redirect_lines_as_the_platform_reads_them() -> None:
    parsed = parse_redirects(
        "\n".join(
            [
                "# a comment",
                "  /a   /b  ",  # 302 by default, whitespace anywhere
                "/c /d#frag 301 # a comment after the status",
                "/e https://example.com/x?q=1 308",
                "/f /g 200",
                "/h https://example.com/ 200",  # a rewrite must stay on these assets
                "/a /other",  # a second rule for a path
                "/i /j 418",
                "/k /l 302 extra",
                "/m:8080 /n",  # fine: a path may hold a colon
                "https://example.com/o /p",  # sources are paths only
                "/q/ /q/index.html",  # loops with html_handling
                "/r/* /index.html",  # loops always
                "/" + "x" * 1000 + " /y",
            ]
        )
    )
    rules = {(r.source, r.destination, r.status) for r in parsed.rules}
    assert rules == {
        ("/a", "/b", 302),
        ("/c", "/d#frag", 301),
        ("/e", "https://example.com/x?q=1", 308),
        ("/f", "/g", 200),
        ("/m:8080", "/n", 302),
    }
    skipped = {item.line_number: item.message for item in parsed.invalid}
    assert set(skipped) == {6, 7, 8, 9, 11, 12, 13, 14}
    assert "200 (rewrite)" in skipped[6] and "second rule" in skipped[7]
    assert "418" in skipped[8] and "found 4" in skipped[9]
    assert "only paths" in skipped[11] and "infinite loop" in skipped[12]
    assert "1000 characters" in skipped[14]
    # Without html_handling the trailing-slash rule no longer loops.
    assert parse_redirects("/q/ /q/index.html", "none").rules


def test_redirect_limits_static_then_dynamic() -> None:
    many = "\n".join(f"/s{i} /t" for i in range(2001)) + "\n/d/* /x\n"
    parsed = parse_redirects(many)
    assert len(parsed.rules) == 2001  # 2000 static, then the dynamic one
    assert "more than 2000 static" in parsed.invalid[0].message
    dynamic = "\n".join(f"/d{i}/* /x" for i in range(101)) + "\n/after /y\n"
    parsed = parse_redirects(dynamic)
    assert len(parsed.rules) == 100
    assert parsed.invalid[0].line_number == 101 and "2 after it" in parsed.invalid[0].message


def test_header_lines_as_the_platform_reads_them() -> None:
    parsed = parse_headers(
        "\n".join(
            [
                "X-Before: path",  # 1: a header before any path
                "/*",
                "  X-Frame-Options: DENY",
                "  Link: </a.css>; rel=preload",
                "  link: </b.js>; rel=preload",  # joined with the one before
                "  Access-Control-Allow-Origin: https://a.example:443",  # colons in the value
                "/api/:name",
                "  ! X-Frame-Options",
                "  X-Name: :name",
                "  Bad Name: v",  # 10
                "  X-Empty:",  # 11
                "  no colon here",  # 12
                "/empty",  # 13: a path with no headers
                "https://example.com:8443/*",  # 14: no ports
                "  X-P: 1",  # 15: belongs to no rule
            ]
        )
    )
    assert [(r.path, r.set, r.unset) for r in parsed.rules] == [
        (
            "/*",
            (
                ("x-frame-options", "DENY"),
                ("link", "</a.css>; rel=preload, </b.js>; rel=preload"),
                ("access-control-allow-origin", "https://a.example:443"),
            ),
            (),
        ),
        ("/api/:name", (("x-name", ":name"),), ("X-Frame-Options",)),
    ]
    assert {item.line_number for item in parsed.invalid} == {1, 10, 11, 12, 13, 14, 15}


def test_at_most_100_header_rules() -> None:
    parsed = parse_headers("\n".join(f"/p{i}\n  X: {i}" for i in range(101)))
    assert len(parsed.rules) == 100 and "more than 100 rules" in parsed.invalid[0].message


@pytest.fixture
def public(tmp_path: Path) -> Path:
    public = tmp_path / "public"
    (public / "users").mkdir(parents=True)
    (public / "index.html").write_text("home")
    (public / "users" / "id.html").write_text("user page")
    (public / "data.bin").write_bytes(bytes(range(256)) * 4)
    return public


def _ask(
    public: Path,
    path: str,
    redirects: str = "",
    headers_file: str = "",
    *,
    query: str = "",
    request: dict[str, str] | None = None,
    has_worker: bool = False,
) -> AssetAnswer | None:
    rules, _ = rules_of(redirects, headers_file, "auto-trailing-slash")
    policy = AssetsPolicy(has_worker=has_worker)
    lookup = AssetDirectory(public).lookup
    return route("GET", path, query, request or {}, policy, lookup, rules)


def test_redirects_apply_before_assets_and_keep_the_query(public: Path) -> None:
    rules = "/index.html /moved 301\n/blog/* https://blog.example/:splat\n/go /there?x=1\n"
    found = _ask(public, "/index.html", rules, query="a=b")
    assert found is not None and found.status == 301
    assert dict(found.headers)["location"] == "/moved?a=b"
    found = _ask(public, "/blog/2024/post", rules, query="a=b")
    assert found is not None and (found.status, dict(found.headers)["location"]) == (
        302,
        "https://blog.example/2024/post?a=b",
    )
    found = _ask(public, "/go", rules, query="a=b")
    assert found is not None and dict(found.headers)["location"] == "/there?x=1"
    # Non-ASCII in a destination goes out percent-encoded (a header is bytes).
    found = _ask(public, "/é", "/é /ü?q=ß#ö 301\n")
    assert found is not None and found.status == 404  # a path is sent encoded: /%C3%A9
    found = _ask(public, "/%C3%A9", "/é /ü?q=ß#ö 301\n")
    assert found is not None
    assert dict(found.headers)["location"] == "/%C3%BC?q=%C3%9F#%C3%B6"


def test_a_200_rule_serves_another_asset_at_the_url(public: Path) -> None:
    rules = "/users/:id /users/id 200\n/gone/* /nothing-here 200\n"
    found = _ask(public, "/users/42", rules, has_worker=True)
    assert found is not None and found.status == 200 and found.file is not None
    assert found.file.read_text() == "user page"
    # A rewrite to a path no asset answers is the assets' 404, not the worker's request.
    found = _ask(public, "/gone/x", rules, has_worker=True)
    assert found is not None and found.status == 404
    # No rule, no asset: the worker's.
    assert _ask(public, "/other", rules, has_worker=True) is None


def test_headers_rules_change_asset_answers_in_order(public: Path) -> None:
    headers_file = (
        "/*\n  X-Frame-Options: DENY\n  Cache-Control: no-store\n"
        "/users/:id\n  ! X-Frame-Options\n  X-User: :id\n  Cache-Control: private\n"
    )
    found = _ask(public, "/users/7", "/users/:id /users/id 200", headers_file)
    assert found is not None
    headers = dict(found.headers)
    assert "x-frame-options" not in headers and headers["x-user"] == "7"
    assert headers["cache-control"] == "no-store, private"  # set, then appended
    assert headers["etag"] and headers["content-type"].startswith("text/html")
    # A 404 of the assets carries them too.
    missing = _ask(public, "/nope", "", headers_file)
    assert missing is not None and missing.status == 404
    assert dict(missing.headers)["x-frame-options"] == "DENY"


def test_host_header_rules_match_the_requests_host(public: Path) -> None:
    headers_file = "https://:sub.example.com/*\n  X-Sub: :sub\n"
    on_host = _ask(public, "/index.html", "", headers_file, request={"host": "docs.example.com:8"})
    elsewhere = _ask(public, "/index.html", "", headers_file, request={"host": "other.test"})
    assert on_host is not None and dict(on_host.headers)["x-sub"] == "docs"
    assert elsewhere is not None and "x-sub" not in dict(elsewhere.headers)


@pytest.mark.parametrize(
    ("spec", "status", "content_range", "span"),
    [
        ("bytes=0-9", 206, "bytes 0-9/1024", (0, 10)),
        ("bytes=1000-", 206, "bytes 1000-1023/1024", (1000, 24)),
        ("bytes=-4", 206, "bytes 1020-1023/1024", (1020, 4)),
        ("bytes=10-99999", 206, "bytes 10-1023/1024", (10, 1014)),
        ("bytes=-5000", 206, "bytes 0-1023/1024", (0, 1024)),
        ("bytes=1024-", 416, "bytes */1024", None),
        ("bytes=-0", 416, "bytes */1024", None),
        ("bytes=0-1,5-6", 200, None, None),  # several ranges: ignored
        ("bytes=9-1", 200, None, None),  # not a valid range: ignored
        ("items=0-1", 200, None, None),
    ],
)
def test_ranges(public: Path, spec: str, status: int, content_range: str | None, span) -> None:
    found = _ask(public, "/data.bin", request={"range": spec})
    assert found is not None and found.status == status
    headers = dict(found.headers)
    assert headers.get("content-range") == content_range
    if span is not None:
        assert (found.offset, found.length) == span
        assert headers["content-length"] == str(span[1])


def test_if_range_keeps_the_range_only_for_the_same_etag(public: Path) -> None:
    whole = _ask(public, "/data.bin")
    assert whole is not None
    etag = dict(whole.headers)["etag"]
    same = _ask(public, "/data.bin", request={"range": "bytes=0-0", "if-range": etag})
    other = _ask(public, "/data.bin", request={"range": "bytes=0-0", "if-range": '"old"'})
    weak = _ask(public, "/data.bin", request={"range": "bytes=0-0", "if-range": f"W/{etag}"})
    assert same is not None and same.status == 206
    assert other is not None and other.status == 200
    assert weak is not None and weak.status == 200


def test_env_assets_fetch_applies_the_rules_too(public: Path) -> None:
    rules, _ = rules_of("/x /index.html 308\n", None, "auto-trailing-slash")
    found = answer(
        "GET", "/x", "", {}, AssetsPolicy(has_worker=False), AssetDirectory(public).lookup, rules
    )
    assert found.status == 308 and dict(found.headers)["location"] == "/index.html"


def test_live_rules_are_re_read_when_the_files_change(public: Path) -> None:
    live = LiveRules(public, "auto-trailing-slash")

    async def current() -> AssetRules:
        return await live.get()

    assert live.now() is None  # compiled when first asked for, not when made
    assert asyncio.run(current()).redirect("/a") is None
    (public / "_redirects").write_text("/a /b\n")
    assert live.now() is None  # changed: the next get() compiles
    assert asyncio.run(current()).redirect("/a") is not None
    (public / "_redirects").write_text("/a /c 301\n# longer now\n")
    found = asyncio.run(current()).redirect("/a")
    assert found is not None and (found.status, found.to) == (301, "/c")
    (public / "_redirects").unlink()
    assert asyncio.run(current()).redirect("/a") is None
    assert live.compiles == 4


def test_live_rules_compile_a_change_once_and_say_its_warnings_once(public: Path) -> None:
    said: list[str] = []
    (public / "_headers").write_text("/*\n  no colon\n")
    live = LiveRules(public, "auto-trailing-slash", said.append)

    async def asks() -> list[AssetRules]:
        return await asyncio.gather(*(live.get() for _ in range(8)))

    first = asyncio.run(asks())
    assert live.compiles == 1 and all(found is first[0] for found in first)
    assert said == []  # the files as they were when made: the config's warnings named them
    (public / "_headers").write_text("/*\n  X-A: 1\n  also no colon\n")
    second = asyncio.run(asks())
    assert live.compiles == 2 and all(found is second[0] for found in second)
    assert second[0].apply_headers("", "/", ()) == (("x-a", "1"),)
    assert len(said) == 1 and said[0].startswith("_headers:3: "), said
    assert live.now() is second[0]
