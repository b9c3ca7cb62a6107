"""``_redirects``, ``_headers`` and byte ranges in a real ``ember dev``: rules applied before
the assets and to their answers only (never to the worker's), skipped lines named at start,
live edits, ``env.ASSETS.fetch`` and ranges read from the file as it is."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.asset_projects import asset_project
from tests.cli.devprocess import DevProcess, until

ENTRY = """
from urllib.parse import urlparse
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        if path == "/home-via-binding":  # the assets' answer, as it came
            return await self.env.ASSETS.fetch("http://any.host/")
        if path == "/via-binding":
            moved = await self.env.ASSETS.fetch("http://any.host/old")
            part = await self.env.ASSETS.fetch(
                "http://any.host/big.bin", headers={"range": "bytes=10-19"}
            )
            body = await part.text()
            return Response(
                body,
                headers={
                    "x-moved": f"{moved.status} {moved.headers.get('location')}",
                    "x-part": f"{part.status} {part.headers.get('content-range')}",
                    "x-via": str(moved.headers.get("x-via")),
                },
            )
        return Response("worker " + path)
"""
REDIRECTS = """\
# moved pages
/old /new 301
/blog/* /posts/:splat
/users/:id /users/profile 200
/broken
"""
HEADERS = """\
/*
  X-Frame-Options: DENY
  Set-Cookie: a=1; Path=/
  Set-Cookie: b=2
/users/:id
  X-User: :id
  ! X-Frame-Options
https://any.host/*
  X-Via: :splat
/
  Set-Cookie: c=3
"""
BIG = bytes(range(256)) * 4096  # 1 MiB: read in chunks, off the loop


def _project(tmp_path: Path) -> Path:
    public = {
        "index.html": "home",
        "users/profile.html": "profile page",
        "big.bin": BIG,
        "_redirects": REDIRECTS,
        "_headers": HEADERS,
    }
    return asset_project(tmp_path / "app", ENTRY, public)


def test_redirects_and_headers_apply_to_the_assets(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with DevProcess(project, state=tmp_path / "state") as dev:
        # The skipped line is named at start, as wrangler names it; so is the second
        # Set-Cookie of one rule, which the platform folds into the first's header.
        assert "/broken" in dev.wait_for_line("public/_redirects:5")
        assert "one cookie" in dev.wait_for_line("public/_headers:4")
        moved = httpx.get(dev.url + "/old?x=1", timeout=10)
        assert moved.status_code == 301 and moved.headers["location"] == "/new?x=1"
        assert moved.headers["x-frame-options"] == "DENY"
        splat = httpx.get(dev.url + "/blog/2024/hello", timeout=10)
        assert splat.status_code == 302 and splat.headers["location"] == "/posts/2024/hello"
        # A 200 rule: the profile page at the user's URL, with that path's headers.
        user = httpx.get(dev.url + "/users/42", timeout=10)
        assert user.status_code == 200 and user.text == "profile page"
        assert user.headers["x-user"] == "42" and "x-frame-options" not in user.headers
        home = httpx.get(dev.url + "/", timeout=10)
        assert home.text == "home" and home.headers["x-frame-options"] == "DENY"
        # One rule's Set-Cookie lines fold into one header, as on Cloudflare; another rule's
        # cookie is a header of its own.
        assert home.headers.get_list("set-cookie") == ["a=1; Path=/, b=2", "c=3"]
        # The worker's own answers get none of them; the files themselves are never served.
        worker = httpx.get(dev.url + "/elsewhere", timeout=10)
        assert worker.text == "worker /elsewhere" and "x-frame-options" not in worker.headers
        assert httpx.get(dev.url + "/_redirects", timeout=10).text == "worker /_redirects"
        assert httpx.get(dev.url + "/_headers", timeout=10).text == "worker /_headers"
        # env.ASSETS.fetch answers as the assets in front do: the rule, then a range.
        via = httpx.get(dev.url + "/via-binding", timeout=10)
        assert via.headers["x-moved"] == "301 /new"
        assert via.headers["x-via"] == "old"  # a host rule: the URL's host, any.host
        passed = httpx.get(dev.url + "/home-via-binding", timeout=10)
        assert passed.text == "home"
        assert passed.headers.get_list("set-cookie") == ["a=1; Path=/, b=2", "c=3"]
        assert "x-via" not in home.headers  # this request's host is 127.0.0.1
        assert via.headers["x-part"] == "206 bytes 10-19/1048576"
        assert via.content == BIG[10:20]

        # Edited, the rules apply on the next request.
        (project / "public" / "_redirects").write_text("/old /newer 308\n/loop/* /index.html\n")
        until(lambda: httpx.get(dev.url + "/old", timeout=10).headers.get("location") == "/newer")
        assert "infinite loop" in dev.wait_for_line("public/_redirects:2")
        assert httpx.get(dev.url + "/blog/x", timeout=10).text == "worker /blog/x"


def test_byte_ranges(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with DevProcess(project, state=tmp_path / "state") as dev:
        url = dev.url + "/big.bin"
        whole = httpx.get(url, timeout=10)
        assert whole.status_code == 200 and whole.content == BIG
        middle = httpx.get(url, headers={"range": "bytes=300000-700000"}, timeout=10)
        assert middle.status_code == 206 and middle.content == BIG[300000:700001]
        assert middle.headers["content-range"] == "bytes 300000-700000/1048576"
        assert "cache-control" not in middle.headers
        tail = httpx.get(url, headers={"range": "bytes=-5"}, timeout=10)
        assert tail.status_code == 206 and tail.content == BIG[-5:]
        start = httpx.get(url, headers={"range": "bytes=1048570-"}, timeout=10)
        assert start.status_code == 206 and start.content == BIG[1048570:]
        past = httpx.get(url, headers={"range": "bytes=2000000-"}, timeout=10)
        assert past.status_code == 416 and past.content == b""
        assert past.headers["content-range"] == "bytes */1048576"
        several = httpx.get(url, headers={"range": "bytes=0-1,4-5"}, timeout=10)
        assert several.status_code == 200 and several.content == BIG
        etag = whole.headers["etag"]
        same = httpx.get(url, headers={"range": "bytes=0-3", "if-range": etag}, timeout=10)
        assert same.status_code == 206 and same.content == BIG[:4]
        stale = httpx.get(url, headers={"range": "bytes=0-3", "if-range": '"x"'}, timeout=10)
        assert stale.status_code == 200 and len(stale.content) == len(BIG)
        head = httpx.head(url, headers={"range": "bytes=0-99"}, timeout=10)
        # RFC 9110 section 14.2: Range is for GET only; HEAD gets the whole file's headers.
        assert head.status_code == 200 and head.headers["content-length"] == "1048576"
