"""The shared ``/w/<account>/<worker>/`` origin, over plain HTTP (the browser half is in
test_shared_origin_browser.py): every answer there is a sandboxed (opaque-origin) document,
a Service Worker script is refused, ``Service-Worker-Allowed`` is dropped and cookies stay on
the worker's own path. The host-named URL (its own origin) passes the worker's headers as they
are, and a non-browser client of ``/w/`` sees the same status and body as before. Worker
cookies there are marked ``Priority=Low`` and at most ``MAX_SET_COOKIES`` go out per answer, so
a flood evicts them before the platform's own (``Priority=High``) cookies."""

from __future__ import annotations

import httpx
import pytest

from ember.runtime.cookies import with_priority
from ember.runtime.platform.shared_origin import MAX_SET_COOKIES, guarded_headers, scoped_cookie
from tests.bindings.ai.support import wait_until
from tests.serve.conftest import ServeProcess, permanent_account, put_worker

HEADERS_WORKER = """
from workers import Response


async def on_fetch(request, env):
    headers = [
        ("content-type", "text/html"),
        ("service-worker-allowed", "/"),
        ("clear-site-data", '"cookies"'),
        ("content-security-policy", "img-src 'self'"),
        ("set-cookie", "root=1; Path=/; HttpOnly"),
        ("set-cookie", "deep=2; path=/app; Domain=127.0.0.1; SameSite=Lax"),
        ("set-cookie", "plain=3"),
        ("x-mine", "kept"),
    ]
    return Response("<p>page of " + request.url + "</p>", headers=headers)
"""

FLOOD_WORKER = """
from workers import Response


async def on_fetch(request, env):
    count = int(request.url.rsplit("/", 1)[1])
    headers = [("set-cookie", f"c{i}=x; Path=/; Priority=High") for i in range(count)]
    return Response("flood", headers=headers)
"""


@pytest.fixture(scope="module")
def shared(serve: ServeProcess) -> ServeProcess:
    account_id, token = permanent_account(serve, "origin-a")
    with serve.api(token) as client:
        assert put_worker(client, account_id, "page", HEADERS_WORKER).status_code == 200
        assert put_worker(client, account_id, "flood", FLOOD_WORKER).status_code == 200
    return serve


def _cookies(response: httpx.Response) -> list[str]:
    return response.headers.get_list("set-cookie")


def test_path_answers_are_sandboxed_documents(shared: ServeProcess) -> None:
    reply = httpx.get(shared.url + "/w/origin-a/page/app/x", timeout=60)
    assert reply.status_code == 200 and reply.text.startswith("<p>page of ")
    assert reply.headers["x-mine"] == "kept"
    policies = reply.headers.get_list("content-security-policy")
    assert "img-src 'self'" in policies  # the worker's own policy still applies
    sandbox = [p for p in policies if p.startswith("sandbox")]
    assert len(sandbox) == 1, policies
    tokens = sandbox[0].split()
    assert "allow-same-origin" not in tokens
    assert {"allow-scripts", "allow-forms", "allow-popups"} <= set(tokens)
    assert "service-worker-allowed" not in reply.headers
    assert "clear-site-data" not in reply.headers  # it would act on every tenant's cookies


def test_path_cookies_stay_on_the_workers_path(shared: ServeProcess) -> None:
    reply = httpx.get(shared.url + "/w/origin-a/page/", timeout=60)
    assert _cookies(reply) == [
        "root=1; Path=/w/origin-a/page; HttpOnly; Priority=Low",
        "deep=2; Path=/w/origin-a/page/app; SameSite=Lax; Priority=Low",
        # no Path: the default would be the request's directory
        "plain=3; Path=/w/origin-a/page; Priority=Low",
    ]
    with httpx.Client(base_url=shared.url, timeout=60) as client:  # a cookie jar still works
        client.get("/w/origin-a/page/")
        assert set(client.cookies.keys()) >= {"root", "plain"}


def test_host_named_answers_keep_the_workers_headers(shared: ServeProcess) -> None:
    reply = shared.worker("origin-a", "page", "/app/x")
    assert reply.status_code == 200
    assert reply.headers["service-worker-allowed"] == "/"
    assert reply.headers["clear-site-data"] == '"cookies"'
    assert reply.headers.get_list("content-security-policy") == ["img-src 'self'"]
    assert _cookies(reply)[0] == "root=1; Path=/; HttpOnly"


def test_a_service_worker_script_is_refused_on_the_shared_path(shared: ServeProcess) -> None:
    refused = httpx.get(
        shared.url + "/w/origin-a/page/sw.js", headers={"service-worker": "script"}, timeout=60
    )
    assert refused.status_code == 403
    assert "Service Worker" in refused.text and "/w/" in refused.text
    port = shared.url.rsplit(":", 1)[1]
    assert f"http://page.origin-a.localhost:{port}/" in refused.text
    assert "sandbox" in refused.headers["content-security-policy"]
    # Its own origin may register one: the header reaches the worker there.
    allowed = shared.worker("origin-a", "page", "/sw.js", headers={"service-worker": "script"})
    assert allowed.status_code == 200


def test_unknown_workers_under_the_path_are_sandboxed_too(shared: ServeProcess) -> None:
    missing = httpx.get(shared.url + "/w/origin-a/nothing/", timeout=60)
    assert missing.status_code == 404
    assert "sandbox" in missing.headers["content-security-policy"]


def test_the_banner_names_the_host_named_url_for_browsers(shared: ServeProcess) -> None:
    port = shared.url.rsplit(":", 1)[1]
    banner = shared.output()
    assert f"http://<worker>.<account>.localhost:{port}/ for browsers" in banner, banner
    assert f"{shared.url}/w/<account>/<worker>/ for clients that cannot send the name" in banner


def test_cookie_paths_move_under_the_prefix() -> None:
    prefix, expires = "/w/Acme/hello", "Expires=Wed, 21 Oct 2037 07:28:00 GMT"
    cases = {
        "a=1; Path=/": "a=1; Path=/w/Acme/hello",
        "a=1;path=/x/": "a=1; Path=/w/Acme/hello/x/",
        "a=1; PATH=": "a=1; Path=/w/Acme/hello",
        "a=1; Path=relative": "a=1; Path=/w/Acme/hello",
        "a=1; domain=.localhost; Secure": "a=1; Secure; Path=/w/Acme/hello",
        # Without a Path the browser's default is the request's directory: for a request to
        # /w/Acme/hello (no trailing slash) that is /w/Acme, every worker of the account.
        f"a=b=c; {expires}": f"a=b=c; {expires}; Path=/w/Acme/hello",
        "a=1": "a=1; Path=/w/Acme/hello",
    }
    for given, sent in cases.items():
        assert scoped_cookie(given.encode(), prefix) == sent.encode(), given


def test_a_cookie_flood_on_the_path_is_capped_and_marked_low(shared: ServeProcess) -> None:
    """Past the browser's per-host cap a flood evicts cookies; the platform's are High, the
    workers' Low (the worker's own Priority is replaced), and one answer carries at most
    ``MAX_SET_COOKIES``, the rest dropped and told to the operator once per answer."""
    assert MAX_SET_COOKIES == 50  # the numbers below (README.md says 50 too)
    flood = MAX_SET_COOKIES + 10
    reply = httpx.get(f"{shared.url}/w/origin-a/flood/{flood}", timeout=60)
    assert reply.status_code == 200 and reply.text == "flood"
    sent = _cookies(reply)
    assert sent == [f"c{i}=x; Path=/w/origin-a/flood; Priority=Low" for i in range(50)]
    notice = "/w/origin-a/flood: dropped 10 of 60 Set-Cookie headers (at most 50 per answer on /w/)"
    wait_until(lambda: notice in shared.output(), "the operator's line")
    assert shared.output().count("dropped 10 of 60 Set-Cookie") == 1
    within = httpx.get(f"{shared.url}/w/origin-a/flood/{MAX_SET_COOKIES}", timeout=60)
    assert len(_cookies(within)) == MAX_SET_COOKIES
    assert f"of {MAX_SET_COOKIES} Set-Cookie" not in shared.output()
    # Its own origin is its own cookie jar: nothing there is capped or rewritten.
    host_named = _cookies(shared.worker("origin-a", "flood", f"/{flood}"))
    assert len(host_named) == flood and host_named[-1] == f"c{flood - 1}=x; Path=/; Priority=High"


def test_worker_cookies_are_low_priority_and_capped_per_answer() -> None:
    cookies = [(b"Set-Cookie", f"n{i}=v; Priority=high".encode()) for i in range(52)]
    headers, dropped = guarded_headers([(b"x-a", b"1"), *cookies, (b"x-b", b"2")], "/w/a/b")
    assert dropped == 2
    assert headers[0] == (b"x-a", b"1") and headers[-2] == (b"x-b", b"2")
    kept = [value for name, value in headers if name.lower() == b"set-cookie"]
    assert kept == [f"n{i}=v; Path=/w/a/b; Priority=Low".encode() for i in range(50)]
    assert guarded_headers(cookies[:3], "/w/a/b")[1] == 0


def test_priority_replaces_whatever_priority_the_cookie_had() -> None:
    cases = {
        "a=1": "a=1; Priority=Low",
        "a=1; Priority=High; Path=/x": "a=1; Path=/x; Priority=Low",
        "a=1;priority=medium;HttpOnly;PRIORITY = high": "a=1;HttpOnly; Priority=Low",
        "a=priority=High": "a=priority=High; Priority=Low",  # the value is not an attribute
    }
    for given, sent in cases.items():
        assert with_priority(given.encode(), "Low") == sent.encode(), given
