"""``_redirects`` / ``_headers`` / ``Range`` written or sent by someone hostile (review14): the
answers they get, on real files. The cost of matching is measured in bench/, never here."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.bindings.assets.files import AssetDirectory
from ember.bindings.assets.rule_files import (
    MAX_EXAMPLES,
    MAX_HEADERS_PER_RULE,
    MAX_PATTERN_PLACEHOLDERS,
    MAX_PATTERN_SEGMENTS,
)
from ember.bindings.assets.rule_match import MAX_HOST_TABLE
from ember.bindings.assets.rules import (
    MAX_ADDED_HEADER_BYTES,
    MAX_HEADER_VALUE_BYTES,
    MAX_LOCATION_BYTES,
    AssetRules,
    Redirect,
    rules_of,
)
from ember.bindings.assets.serving import AssetAnswer, AssetsPolicy, answer, route


@pytest.fixture
def public(tmp_path: Path) -> Path:
    public = tmp_path / "public"
    public.mkdir()
    (public / "a.txt").write_text("0123456789")
    (public / "index.html").write_text("home")
    return public


def _get(
    public: Path,
    path: str,
    redirects: str | None = None,
    headers_file: str | None = None,
    request: dict[str, str] | None = None,
    method: str = "GET",
) -> AssetAnswer:
    rules, _ = rules_of(redirects, headers_file, "auto-trailing-slash")
    lookup = AssetDirectory(public).lookup
    return answer(method, path, "", request or {}, AssetsPolicy(), lookup, rules)


def test_route_looks_the_redirect_up_once_per_request(public: Path) -> None:
    calls: list[str] = []

    class Counting(AssetRules):
        def redirect(self, pathname: str) -> Redirect | None:
            calls.append(pathname)
            return super().redirect(pathname)

    compiled, _ = rules_of("/old /a.txt 301\n/x/* /a.txt\n", None, "auto-trailing-slash")
    rules = Counting(compiled.static, compiled.dynamic, compiled.headers)
    lookup = AssetDirectory(public).lookup
    for path, status in (("/old", 301), ("/a.txt", 200), ("/x/y", 302)):
        calls.clear()
        found = route("GET", path, "", {}, AssetsPolicy(has_worker=True), lookup, rules)
        assert found is not None and found.status == status
        assert calls == [path]
    calls.clear()
    assert route("GET", "/worker", "", {}, AssetsPolicy(has_worker=True), lookup, rules) is None
    assert calls == ["/worker"]


def test_a_backslash_never_makes_a_redirect_leave_the_site(public: Path) -> None:
    # review14: "/go/\evil.com" went out as "Location: /\evil.com", which browsers follow to
    # evil.com; the platform's new URL() turns "\" into "/" before any rule is matched.
    redirects = "/go/* /:splat 302\n/p/:name /:name 301\n"
    for path, location in (
        ("/go/\\evil.com", "/evil.com"),
        ("/go/\\\\evil.com", "/evil.com"),
        ("/go//evil.com", "/evil.com"),
        ("/go/\\/evil.com/x", "/evil.com/x"),
        ("/go/%5Cevil.com", "/%5Cevil.com"),  # encoded: a path segment, not a slash
        ("/go/a/../\\evil.com", "/evil.com"),
        ("/x/%2e%2E/go/b", "/b"),  # dot segments, encoded too, resolved first
        ("/go/<a b>", "/%3Ca%20b%3E"),
        ("/go/\x01x", "/%01x"),
    ):
        found = _get(public, path, redirects)
        assert found.status == 302, path
        assert dict(found.headers)["location"] == location, path
    found = _get(public, "/p/\\evil.com", redirects)
    assert found.status == 404  # "/p//evil.com": the placeholder needs one segment
    found = _get(public, "/x/./%2E%2e/a.txt", None)
    assert found.status == 200  # "/a.txt", as the platform resolves it


def test_headers_that_frame_the_response_are_skipped_with_a_warning(public: Path) -> None:
    # review14: "Transfer-Encoding: chunked" went out beside content-length, and
    # "Content-Length: 2" cut the body short (a RuntimeError in the server).
    framing = [
        "Content-Length: 2",
        "Transfer-Encoding: chunked",
        "Connection: close",
        "Keep-Alive: timeout=5",
        "TE: trailers",
        "Trailer: x",
        "Upgrade: websocket",
        "Proxy-Connection: keep-alive",
        "! Content-Length",
        "! Transfer-Encoding",
    ]
    text = "/*\n" + "".join(f"  {line}\n" for line in framing) + "  X-Fine: yes\n  ! X Bad\n"
    rules, notes = rules_of(None, text, "auto-trailing-slash")
    assert len(notes) == len(framing) + 1
    for note, line in zip(notes, framing, strict=False):
        assert "_headers:" in note and line in note
        assert "sets how the response is framed" in note
    assert "! X Bad" in notes[-1]
    found = _get(public, "/a.txt", None, text)
    headers = dict(found.headers)
    assert headers["content-length"] == "10" and headers["x-fine"] == "yes"
    names = [name for name, _ in found.headers]
    assert sorted(set(names)) == sorted(names)
    assert not {"transfer-encoding", "connection", "keep-alive", "te", "trailer"} & set(names)


def test_a_range_of_thousands_of_digits_is_read_as_a_huge_number(public: Path) -> None:
    # review14: "bytes=0-" and 5,000 nines was a 500 (int() refuses that many digits).
    nines = "9" * 5000
    found = _get(public, "/a.txt", request={"range": f"bytes=0-{nines}"})
    assert found.status == 206 and dict(found.headers)["content-range"] == "bytes 0-9/10"
    found = _get(public, "/a.txt", request={"range": f"bytes=-{nines}"})
    assert found.status == 206 and (found.offset, found.length) == (0, 10)
    found = _get(public, "/a.txt", request={"range": f"bytes={nines}-"})
    assert found.status == 416
    found = _get(public, "/a.txt", request={"range": f"bytes={'0' * 5000}2-3"})
    assert found.status == 206 and (found.offset, found.length) == (2, 2)
    found = _get(public, "/a.txt", request={"range": f"bytes={nines}-1"})
    assert found.status == 200  # last before first: not a valid range, ignored


def test_a_header_removed_then_set_again_is_sent_as_the_platform_sends_it(public: Path) -> None:
    # review14: the platform deletes, then appends (the name was set before): "X-A: 2"; ember
    # sent no X-A at all.
    text = "/*\n  X-A: 1\n  Set-Cookie: a=1\n/a.txt\n  ! X-A\n  X-A: 2\n  Set-Cookie: b=2\n"
    found = _get(public, "/a.txt", None, text)
    assert [v for k, v in found.headers if k == "x-a"] == ["2"]
    assert [v for k, v in found.headers if k == "set-cookie"] == ["a=1", "b=2"]
    text = "/*\n  X-A: 1\n/a.txt\n  X-A: 2\n/a*\n  X-A: 3\n  ! Content-Type\n"
    found = _get(public, "/a.txt", None, text)
    assert [v for k, v in found.headers if k == "x-a"] == ["1, 2, 3"]
    assert "content-type" not in dict(found.headers)


def test_headers_per_rule_are_capped_and_many_apply_in_one_pass(public: Path) -> None:
    # review14: 1,464 headers in one rule cost 0.21 s a request (a list rebuilt per header).
    text = "/*\n" + "".join(f"  X-{i}: v\n" for i in range(MAX_HEADERS_PER_RULE + 5))
    rules, notes = rules_of(None, text, "auto-trailing-slash")
    assert len(notes) == 5 and f"more than {MAX_HEADERS_PER_RULE} headers" in notes[0]
    found = _get(public, "/a.txt", None, text)
    names = [k for k, _ in found.headers if k.startswith("x-")]
    assert names == [f"x-{i}" for i in range(MAX_HEADERS_PER_RULE)]
    # 100 rules that all match, each setting the same name: one value, joined in order.
    text = "".join(f"/:n{i}\n  X-Same: {i}\n" for i in range(100))
    found = _get(public, "/a.txt", None, text)
    assert dict(found.headers)["x-same"] == ", ".join(str(i) for i in range(100))


def test_a_destination_of_two_slashes_names_another_host(public: Path) -> None:
    # review14: "/old //cdn.example.com/new" went out as "/new"; the platform resolves the
    # destination with new URL(to, request.url): another host, the request's scheme.
    redirects = "/old //cdn.example.com/new 301\n/x/* //cdn.example.com/:splat\n/y/* /:splat\n"
    found = _get(public, "/old", redirects)
    assert dict(found.headers)["location"] == "//cdn.example.com/new"
    found = _get(public, "/x/a//b", redirects)
    assert dict(found.headers)["location"] == "//cdn.example.com/a/b"
    found = _get(public, "/y//cdn.example.com", redirects)  # a capture never names a host
    assert dict(found.headers)["location"] == "/cdn.example.com"


def test_a_range_applies_to_get_only(public: Path) -> None:
    # RFC 9110 section 14.2: a server ignores Range on any method but GET.
    found = _get(public, "/a.txt", request={"range": "bytes=0-4"}, method="HEAD")
    assert found.status == 200 and dict(found.headers)["content-length"] == "10"
    assert "content-range" not in dict(found.headers) and found.file is None
    found = _get(public, "/a.txt", request={"range": "bytes=0-4"})
    assert found.status == 206 and (found.offset, found.length) == (0, 5)


def test_substitution_past_the_caps_is_refused_before_it_is_built() -> None:
    # review17: 32 lines of ~333 :splat under each of 8 rules and an 8 KB path built 680 MB of
    # headers; a destination of :splat repeated built a 2.7 MB Location.
    value = (":splat" * 333)[:1990]
    text = "".join(
        f"/{'a' * i}*\n" + "".join(f"  x-{j}: {value}\n" for j in range(31)) + "  x-ok: fine\n"
        for i in range(4)
    )
    rules, _ = rules_of(None, text, "auto-trailing-slash")
    out = rules.apply_headers("h", "/" + "a" * 1000, (("etag", "x"),))  # 331 KB a value
    assert [n for n, _ in out] == ["etag", "x-ok"]
    assert ("x-ok", "fine, fine, fine, fine") in out
    # Each value under its cap (24 characters a splat), all of them together past theirs.
    out = rules.apply_headers("h", "/aaa" + "b" * 21, ())
    assert all(len(v) <= MAX_HEADER_VALUE_BYTES for _, v in out)
    assert 7 <= len(out) < 10
    assert sum(len(n) + len(v) for n, v in out) <= MAX_ADDED_HEADER_BYTES
    assert ("x-ok", "fine, fine, fine, fine") in out
    # Small captures still substitute in full.
    small = dict(rules.apply_headers("h", "/b", ()))
    assert small["x-0"] == "b" * 331 + ":spl"


def test_a_location_past_its_cap_is_not_a_redirect(public: Path) -> None:
    redirects = "/go/* /" + ":splat" * 160 + "\n/s/:x /to/:x\n"
    rules, _ = rules_of(redirects, None, "auto-trailing-slash")
    assert rules.redirect("/go/" + "b" * 9000) is None  # 160 x 9 KB: never built
    assert rules.redirect("/go/" + "b" * 40) == Redirect(302, "/" + "b" * 40 * 160)
    assert rules.redirect("/s/" + "c" * (MAX_LOCATION_BYTES + 1)) is None
    assert rules.redirect("/s/abc") == Redirect(302, "/to/abc")
    found = _get(public, "/go/" + "b" * 9000, redirects)
    assert found.status == 404  # as if no rule matched: no asset at that path


def test_a_pattern_past_32_placeholders_or_64_segments_is_skipped_naming_its_line() -> None:
    # review17: 100 rules of 397 segments like x:aa/x:ab/... cost >100 ms a request.
    names = [f"p{i}" for i in range(40)]
    ok_places = "/" + "/".join(f"x:{n}" for n in names[:MAX_PATTERN_PLACEHOLDERS])
    many_places = "/" + "/".join(f"x:{n}" for n in names[: MAX_PATTERN_PLACEHOLDERS + 1])
    ok_segments = "/" + "/".join(["s"] * MAX_PATTERN_SEGMENTS)
    many_segments = "/" + "/".join(["s"] * (MAX_PATTERN_SEGMENTS + 1))
    headers = "".join(
        f"{p}\n  x-a: 1\n" for p in (ok_places, many_places, ok_segments, many_segments)
    )
    redirects = f"{many_places} /t\n{ok_places} /u\n/a/{many_segments[1:]}/* /v\n"
    rules, notes = rules_of(redirects, headers, "none")
    assert [p.source for p, _ in rules.headers] == [ok_places, ok_segments]
    assert [p.source for p, _ in rules.dynamic] == [ok_places]
    notes = [note for note in notes if "placeholders" in note]  # (their headers' lines too)
    assert len(notes) == 4
    assert notes[0].startswith("_redirects:1: more than 32 placeholders or 64 segments")
    assert notes[1].startswith("_redirects:3: more than 32 placeholders or 64 segments")
    assert notes[2].startswith("_headers:3: more than 32 placeholders or 64 segments")
    assert notes[3].startswith("_headers:7: more than 32 placeholders or 64 segments")
    assert rules.redirect("/" + "/".join(f"x{i}" for i in range(32))) == Redirect(302, "/u")


def test_a_host_rule_stays_within_its_table() -> None:
    # A host mixing * with :name. placeholders is matched by the table, within MAX_HOST_TABLE
    # cells: a rule of 10 tokens and a host of 200 characters is past it (it cost ~1 ms).
    rule = "https://" + "".join(f":h{j}-" for j in range(9)) + "*/"
    rules, _ = rules_of(None, f"{rule}\n  x-a: 1\n", "none")
    small = "-".join("a" * 3 for _ in range(10))
    assert rules.apply_headers(small, "/", ()) == (("x-a", "1"),)
    assert MAX_HOST_TABLE <= 1024
    assert rules.apply_headers("a-" * 99 + "b", "/", ()) == ()


def test_repeated_set_cookie_lines_in_one_rule_fold_as_on_the_platform(public: Path) -> None:
    # workers-shared's parseHeaders joins every name repeated in a rule with ", ", Set-Cookie
    # too: Cloudflare sends one folded header, which a browser reads as one cookie. ember sends
    # what production sends, and says so. Cookies of different rules are appended each on its
    # own line (workerd's Headers.append), through the front as through env.ASSETS.
    text = "/*\n  Set-Cookie: a=1; Path=/\n  X-B: 1\n  Set-Cookie: b=2\n  X-B: 2\n"
    text += "  Set-Cookie: e=5\n/a*\n  Set-Cookie: c=3\n"
    found = _get(public, "/a.txt", None, text)
    cookies = [v for k, v in found.headers if k == "set-cookie"]
    assert cookies == ["a=1; Path=/, b=2, e=5", "c=3"]
    assert [v for k, v in found.headers if k == "x-b"] == ["1, 2"]
    # One warning a rule, at its second Set-Cookie line, naming file and line.
    _, notes = rules_of(None, text, "auto-trailing-slash")
    assert len(notes) == 1 and notes[0].startswith("_headers:4: ")
    assert "one header" in notes[0] and "one cookie" in notes[0]
    assert notes[0].endswith("| Set-Cookie: b=2")
    # A later rule's ! Set-Cookie removes them all, and its own are set anew.
    found = _get(public, "/a.txt", None, text + "/a.txt\n  ! Set-Cookie\n  Set-Cookie: d=4\n")
    assert [v for k, v in found.headers if k == "set-cookie"] == ["d=4"]


def test_a_path_written_twice_keeps_its_last_rule_so_cookies_need_two_patterns(
    public: Path,
) -> None:
    # As wrangler uploads the rules (an object keyed by path): the second /a.txt replaces the
    # first, so the advice the warning gives is a rule of its own with another pattern.
    same = "/a.txt\n  Set-Cookie: a=1\n/a.txt\n  Set-Cookie: b=2\n"
    found = _get(public, "/a.txt", None, same)
    assert [v for k, v in found.headers if k == "set-cookie"] == ["b=2"]
    two = "/a.txt\n  Set-Cookie: a=1\n/a.*\n  Set-Cookie: b=2\n"
    found = _get(public, "/a.txt", None, two)
    assert [v for k, v in found.headers if k == "set-cookie"] == ["a=1", "b=2"]
    assert rules_of(None, two, "auto-trailing-slash")[1] == []
    # Silent on the platform; ember says which path lost its earlier rule.
    assert rules_of(None, same, "auto-trailing-slash")[1] == [
        "_headers: /a.txt has more than one rule: only the last one's headers apply, as on "
        "Cloudflare (the platform keeps one rule a path); write them as one rule"
    ]


def test_repeated_path_warnings_are_capped() -> None:
    text = "".join(f"/p{i}\n  X-A: 1\n/p{i}\n  X-B: 2\n" for i in range(MAX_EXAMPLES + 3))
    _, notes = rules_of(None, text, "auto-trailing-slash")
    assert len(notes) == MAX_EXAMPLES + 1
    assert notes[0].startswith("_headers: /p0 has more than one rule")
    assert notes[-1] == "_headers: ... and 3 more such paths"


def test_folded_set_cookie_warnings_are_capped_like_skipped_lines() -> None:
    # One note a rule (not a line), the first MAX_EXAMPLES kept, then how many more.
    rule = "/r{i}\n  Set-Cookie: a=1\n  Set-Cookie: b=2\n  Set-Cookie: c=3\n"
    text = "".join(rule.format(i=i) for i in range(MAX_EXAMPLES + 5))
    _, notes = rules_of(None, text, "auto-trailing-slash")
    assert len(notes) == MAX_EXAMPLES + 1
    assert notes[0].startswith("_headers:3: a second Set-Cookie under /r0: ")
    assert notes[-1] == "_headers: ... and 5 more such lines"
