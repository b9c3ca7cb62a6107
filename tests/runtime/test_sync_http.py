"""Sync HTTP clients in a handler (``requests``, ``urllib3``, ``httpx.Client``) and
``httpx.AsyncClient`` make subrequests through the supervisor; ``urllib.request`` gives a clear
error, as on the platform. A real upstream (uvicorn on 127.0.0.1) answers them."""

from __future__ import annotations

import hashlib

import pytest

from tests.runtime.harness import Harness, write_project
from tests.runtime.sync_http_support import WORKER
from tests.runtime.upstream import Upstream, ask_worker


@pytest.fixture(scope="module")
def worker(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    return harness.deploy(write_project(tmp_path_factory.mktemp("sync") / "sync", WORKER))


def test_requests_get_sends_headers_and_reads_status_headers_cookies(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "requests-get")
    assert (got["status"], got["reason"], got["x-upstream"]) == (200, "OK", "1")
    assert got["echo"]["headers"]["x-sent"] == "yes"
    assert got["echo"]["query"] == {"a": "1"}
    assert got["echo"]["headers"]["user-agent"].startswith("python-requests/")
    assert got["cookie"] == "oat"
    assert got["url"] == f"{upstream.url}/echo?a=1"


def test_requests_bodies_json_form_bytes_and_a_streamed_upload(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "requests-post")
    assert got["json"]["body"] == '{"k": [1, 2]}'
    assert got["json"]["headers"]["content-type"] == "application/json"
    assert got["form"]["body"] == "a=b+c"
    assert got["form"]["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert (got["bytes"]["method"], got["bytes"]["body"]) == ("PUT", "\x00raw")
    large = got["large"]  # over the inline limit: it goes up as a stream, with credit
    assert large["length"] == 300_000
    assert large["sha256"] == hashlib.sha256(b"u" * 300_000).hexdigest()


def test_requests_redirects_followed_each_hop_a_subrequest_or_left_alone(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "requests-redirect")
    assert (got["status"], got["history"], got["path"]) == (200, [302], "/echo")
    assert (got["manual"], got["location"]) == (302, "/echo")


def test_requests_streamed_body_large_body_and_error_status(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "requests-stream")
    assert "".join(got["chunks"]) == "".join(f"chunk-{i};" for i in range(5))
    assert got["big"] == 700_000  # past the stream's credit window: credit flows back
    assert got["status"] == 418


def test_requests_timeout_raises_requests_timeout(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "requests-timeout")
    assert got["caught"] == "Timeout"
    assert got["error"] == "ReadTimeout"


def test_urllib3_pool_manager_bodies_streams_and_redirects(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "urllib3")
    assert got["status"] == 200
    assert got["echo"]["method"] == "POST" and got["echo"]["body"] == '{"z":1}'
    assert got["echo"]["headers"]["x-sent"] == "u3"
    assert got["parts"] == "".join(f"chunk-{i};" for i in range(4))
    assert got["redirected"] == "/echo"


def test_httpx_client_bodies_redirects_streams_status_and_timeout(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "httpx-sync")
    assert got["status"] == 200
    assert (got["echo"]["body"], got["echo"]["headers"]["x-sent"]) == ("hx", "hx")
    assert got["redirect"] == 302  # httpx does not follow unless asked
    assert got["followed"] == "/echo"
    assert "".join(got["chunks"]) == "chunk-0;chunk-1;chunk-2;"
    assert got["teapot"] == [418, "I'm a Teapot", "status body"]  # uvicorn's phrase
    assert got["timeout"] == "ReadTimeout"


def test_httpx_async_client_goes_through_fetch(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    got = ask_worker(harness, worker, upstream, "httpx-async")
    assert (got["status"], got["echo"]["query"]) == (200, {"via": "async"})
    assert "".join(got["chunks"]) == "chunk-0;chunk-1;chunk-2;"


def test_urllib_request_is_refused_with_a_urlerror_naming_the_alternatives(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    before = len(upstream.seen)
    got = ask_worker(harness, worker, upstream, "urllib")
    assert got["caught"] == "URLError"
    for alternative in ("requests", "httpx.AsyncClient", "fetch()"):
        assert alternative in got["reason"]
    assert len(upstream.seen) == before  # nothing reached the upstream


def test_aiohttp_goes_through_fetch_where_installed(
    harness: Harness, worker: str, upstream: Upstream
) -> None:
    pytest.importorskip("aiohttp")
    got = ask_worker(harness, worker, upstream, "aiohttp")
    assert got["echo"]["query"] == {"via": "aiohttp"} and got["echo"]["body"] == '{"a": 1}'
    assert got["redirected"] == [f"{upstream.url}/echo", [302]]
    assert "".join(got["chunks"]) == "chunk-0;chunk-1;chunk-2;"
    assert got["big"] == 700_000
    assert got["timeout"] == "ConnectionTimeoutError" or got["timeout"].endswith("TimeoutError")
    assert got["cookie"] == "oat"
