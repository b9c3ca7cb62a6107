"""Outbound ``fetch`` from a handler goes through the supervisor (httpx), under a network policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.runtime.subrequest import NetworkPolicy
from tests.runtime.harness import Harness, write_project
from tests.runtime.upstream import Upstream, ask_worker

ECHO = """
from workers import Response

async def fetch(request, env, ctx):
    body = await request.text()
    return Response(f"{request.method} {request.headers.get('x-sent')} {body}",
                    headers={"x-echo": "1"}, status=201)
"""


def test_js_fetch_with_to_js_init_and_passing_a_fetched_response_through(
    harness: Harness, tmp_path: Path
) -> None:
    echo = harness.deploy(write_project(tmp_path / "echo", ECHO))
    caller = f"""
    from js import fetch, Object
    from pyodide.ffi import to_js
    from workers import Response

    async def on_fetch(request, env):
        init = to_js({{"method": "POST", "body": "payload",
                       "headers": {{"x-sent": "yes", "x-test-deployment": "{echo}"}}}},
                     dict_converter=Object.fromEntries)
        reply = await fetch("{harness.url}/anything", init)
        if request.url.endswith("/raw"):
            return reply  # the fetched response, streamed through unchanged
        echo = reply.headers.get("x-echo")
        return Response(f"{{reply.status}} {{reply.ok}} {{echo}} {{await reply.text()}}")
    """
    deployment_id = harness.deploy(write_project(tmp_path / "caller", caller))
    with harness.client(deployment_id) as client:
        assert client.get("/").text == "201 True 1 POST yes payload"
        raw = client.get("/raw")
    assert (raw.status_code, raw.text, raw.headers["x-echo"]) == (201, "POST yes payload", "1")


@pytest.mark.parametrize(
    ("policy", "host", "addresses", "refused"),
    [
        (NetworkPolicy(), "localhost", ["127.0.0.1"], None),
        (NetworkPolicy(allow_loopback=False), "localhost", ["127.0.0.1", "::1"], "loopback"),
        (NetworkPolicy(allow_private=False), "printer.lan", ["192.168.1.20"], "private"),
        (NetworkPolicy(allow_public=False), "example.com", ["93.184.215.14"], "public"),
        (
            NetworkPolicy(allowed_hosts=("*.example.com",)),
            "api.example.com",
            ["93.184.215.14"],
            None,
        ),
        (
            NetworkPolicy(allowed_hosts=("*.example.com",)),
            "evil.test",
            ["93.184.215.14"],
            "allowed hosts",
        ),
    ],
)
def test_network_policy(
    policy: NetworkPolicy, host: str, addresses: list[str], refused: str | None
) -> None:
    reason = policy.refusal(host, addresses)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason


PLATFORM = NetworkPolicy(allow_loopback=False, allow_private=False)


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("100.100.100.200", "private or reserved"),  # carrier-grade NAT: a cloud's metadata
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:0:7f00:1", "loopback"),  # IPv4-translated
        ("::7f00:1", "loopback"),  # IPv4-compatible
        ("::1", "loopback"),
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("0.0.0.0", "loopback"),
        ("224.0.0.1", "reserved"),
        ("ff02::1", "reserved"),
        ("198.18.0.1", "reserved"),
        ("240.0.0.1", "reserved"),
        ("2001::1", "reserved"),  # Teredo: its client address is hidden
        ("93.184.215.14", None),
        ("2606:2800:220:1::1", None),
        ("64:ff9b::5db8:d70e", None),  # NAT64 of a public address
    ],
)
def test_the_platform_policy_reaches_only_globally_routable_addresses(
    address: str, refused: str | None
) -> None:
    reason = PLATFORM.refusal("site.test", [address])
    assert (reason is None) if refused is None else (reason is not None and refused in reason)


def test_a_fetched_response_parses_its_json_while_response_json_still_builds_one(
    harness: Harness, tmp_path: Path
) -> None:
    """JS has both: ``Response.json(data)`` (static, builds) and ``response.json()`` (reads the
    body). ``await (await fetch(url)).json()`` is the most common fetch line there is."""
    api = harness.deploy(
        write_project(
            tmp_path / "api",
            """
            from workers import Response

            async def fetch(request, env, ctx):
                return Response.json({"items": [1, 2], "name": "x"}, status=202)
            """,
        )
    )
    caller = f"""
    from workers import Response, fetch

    async def on_fetch(request, env):
        reply = await fetch("{harness.url}/", headers={{"x-test-deployment": "{api}"}})
        data = await reply.json()
        built = Response.json(data, headers={{"x-built": "yes"}})
        return Response(f"{{reply.status}} {{data.name}} {{data['items']}} "
                        f"{{built.headers.get('content-type')}} {{await built.text()}}")
    """
    deployment_id = harness.deploy(write_project(tmp_path / "caller", caller))
    with harness.client(deployment_id) as client:
        assert client.get("/").text == ('202 x [1, 2] application/json {"items":[1,2],"name":"x"}')


SESSION_SITE = """
from workers import Response

async def on_fetch(request, env):
    login = request.url.endswith("/login")
    headers = {"set-cookie": "session=FIRST-CALLERS; Path=/"} if login else {}
    return Response(f"cookie: {request.headers.get('cookie')}", headers=headers)
"""


def test_fetch_keeps_no_cookies_between_calls_or_deployments(
    harness: Harness, tmp_path: Path
) -> None:
    """Workers' fetch has no cookie jar: a cookie one deployment's subrequest got back must
    never ride along on a later subrequest, its own or another tenant's (they share the
    supervisor's HTTP client). The first caller still sees the Set-Cookie header itself."""
    site = harness.deploy(write_project(tmp_path / "site", SESSION_SITE))
    caller = f"""
    from workers import Response, fetch

    async def on_fetch(request, env):
        path = request.url.rsplit("/", 1)[1]
        reply = await fetch("{harness.url}/" + path, headers={{"x-test-deployment": "{site}"}})
        return Response(f"{{await reply.text()}} | set: {{reply.headers.get('set-cookie')}}")
    """
    first = harness.deploy(write_project(tmp_path / "first", caller))
    second = harness.deploy(write_project(tmp_path / "second", caller))
    with harness.client(first) as client:
        assert client.get("/login").text == "cookie: None | set: session=FIRST-CALLERS; Path=/"
        assert client.get("/again").text == "cookie: None | set: None"
    with harness.client(second) as client:
        assert client.get("/whoami").text == "cookie: None | set: None"


NOT_FOLLOWED = """
from workers import Response, fetch

async def on_fetch(request, env):
    route = request.url.split("/", 3)[-1]
    reply = await fetch(request.headers["x-upstream"] + "/" + route)
    return Response.json([reply.status, reply.redirected, await reply.text()])
"""


@pytest.mark.parametrize(
    ("route", "answer"),
    [
        ("status/304", [304, False, ""]),  # not a redirect: no body either
        ("status/301", [301, False, "status body"]),  # no Location: nowhere to follow
        ("gzip?status=304", [304, False, ""]),
    ],
)
def test_a_3xx_without_a_location_is_returned_as_it_is(
    harness: Harness, tmp_path: Path, route: str, answer: list
) -> None:
    """Under ``redirect: follow`` only a 3xx with a Location is followed (it was an internal
    error in binding __fetch__)."""
    upstream = Upstream()
    try:
        deployment_id = harness.deploy(write_project(tmp_path / "nf", NOT_FOLLOWED))
        assert ask_worker(harness, deployment_id, upstream, route) == answer
    finally:
        upstream.close()
