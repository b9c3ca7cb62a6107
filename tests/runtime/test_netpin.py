"""Subrequests connect only to addresses the network policy checked (DNS rebinding).

Real uvicorn servers on 127.0.0.1 stand in for hosts; the two seams are the resolver (answers
that change between calls, as a rebinding DNS server gives) and the dialer, which plays the
public internet on loopback: it carries a connection for a public test address to a loopback
server and refuses any other non-loopback address without sending a packet.
"""

from __future__ import annotations

import asyncio
import ssl
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpcore
import pytest
import trustme
import uvicorn

from ember.bindings.base import ServiceError, StreamReply
from ember.runtime.calls import CallContextImpl
from ember.runtime.netpin import Network
from ember.runtime.services import SharedResources
from ember.runtime.subrequest import NetworkPolicy, SubrequestService

PLATFORM = NetworkPolicy(allow_loopback=False, allow_private=False)
PUBLIC = "93.184.215.14"  # global to the policy; the dialer carries it to a loopback server
Scope = dict[str, Any]


@dataclass
class Site:
    """An ASGI app that records each request's path and Host header; ``/redirect?to=URL``
    answers 302 to URL, anything else answers with the site's name."""

    name: str
    seen: list[tuple[str, str]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        self.seen.append((scope["path"], headers.get(b"host", b"").decode()))
        query = scope["query_string"].decode()
        if scope["path"] == "/redirect":
            start = {"status": 302, "headers": [(b"location", query.removeprefix("to=").encode())]}
            await send({"type": "http.response.start", **start})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": self.name.encode()})


@asynccontextmanager
async def serving(app: Site, **tls: str) -> AsyncIterator[int]:
    """Serve ``app`` on 127.0.0.1 (with ``ssl_keyfile``/``ssl_certfile`` if given); the port."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="error", **tls)
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


@dataclass(eq=False)  # hashed by identity: it is part of the shared client's key
class Answers:
    """A resolver whose n-th answer for a host is ``answers[host][n]`` (the last one repeats)."""

    answers: dict[str, list[list[str]]]
    asked: list[str] = field(default_factory=list)

    async def resolve(self, host: str, port: int) -> list[str]:
        replies = self.answers[host]
        self.asked.append(host)
        return replies[min(self.asked.count(host), len(replies)) - 1]


class LoopbackInternet(httpcore.AsyncNetworkBackend):
    """Dials loopback addresses for real, ``PUBLIC`` at the loopback port ``public_port``, and
    refuses every other address without a packet; records what it was asked to dial."""

    def __init__(self, public_port: int | None = None) -> None:
        self.public_port = public_port
        self.dialled: list[tuple[str, int]] = []
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialled.append((host, port))
        if host == PUBLIC and self.public_port is not None:
            return await self._real.connect_tcp("127.0.0.1", self.public_port, timeout=timeout)
        if host in ("127.0.0.1", "::1"):
            return await self._real.connect_tcp(host, port, timeout=timeout)
        raise httpcore.ConnectError(f"{host} is off this test's loopback internet")

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


async def fetch(service: SubrequestService, url: str) -> str:
    """``fetch(url)`` through ``service``: the response's body, or the error's message."""
    try:
        reply = await service.call("fetch", ["GET", url, [], "follow", None], context())
    except ServiceError as exc:
        return f"error: {exc}"
    assert isinstance(reply, StreamReply)
    return b"".join([chunk async for chunk in reply.chunks]).decode()


def context() -> CallContextImpl:
    return CallContextImpl("netpin", 1, None, {})


def run(tmp_path: Path, test: Callable[[SharedResources], Awaitable[None]]) -> None:
    async def main() -> None:
        resources = SharedResources(tmp_path / "state")
        try:
            await test(resources)
        finally:
            await resources.aclose()

    asyncio.run(main())


def test_a_rebound_answer_never_reaches_the_loopback_address_the_policy_refuses(
    tmp_path: Path,
) -> None:
    """The classic rebinding: the first answer is public (the policy allows it), every later
    one is 127.0.0.1. The connection must go to the address that was checked; resolving again
    to connect would hand the request to the loopback server."""
    internal, public = Site("internal"), Site("public")

    async def test(resources: SharedResources) -> None:
        async with serving(internal) as internal_port, serving(public) as public_port:
            resolver = Answers({"rebind.test": [[PUBLIC], ["127.0.0.1"]]})
            dialer = LoopbackInternet(public_port)
            service = SubrequestService(resources, 50, PLATFORM, Network(resolver, dialer))
            body = await fetch(service, f"http://rebind.test:{internal_port}/secret")
            assert internal.seen == [], "the request reached the loopback server"
            assert body == "public"
            assert public.seen == [("/secret", f"rebind.test:{internal_port}")]
            assert dialer.dialled == [(PUBLIC, internal_port)]

    run(tmp_path, test)


@pytest.mark.parametrize(
    ("answers", "refused"),
    [
        ([["127.0.0.1"]], "loopback address (network policy)"),
        ([[PUBLIC, "127.0.0.1"]], "loopback address (network policy)"),  # every address counts
        ([["169.254.169.254"]], "private or reserved address (169.254.169.254) (network policy)"),
    ],
)
def test_each_redirect_hop_is_checked_where_its_connection_is_made(
    tmp_path: Path, answers: list[list[str]], refused: str
) -> None:
    internal, public = Site("internal"), Site("public")

    async def test(resources: SharedResources) -> None:
        async with serving(internal) as internal_port, serving(public) as public_port:
            resolver = Answers({"site.test": [[PUBLIC]], "internal.test": answers})
            dialer = LoopbackInternet(public_port)
            service = SubrequestService(resources, 50, PLATFORM, Network(resolver, dialer))
            hop = f"http://internal.test:{internal_port}/secret"
            body = await fetch(service, f"http://site.test:{public_port}/redirect?to={hop}")
            assert body.startswith("error: Fetch API cannot load: internal.test resolves to")
            assert body.endswith(refused)
            assert internal.seen == []
            assert [path for path, _ in public.seen] == ["/redirect"]
            assert dialer.dialled == [(PUBLIC, public_port)]  # the hop dialled nothing

    run(tmp_path, test)


def test_a_host_the_policy_refuses_by_name_is_not_even_resolved(tmp_path: Path) -> None:
    async def test(resources: SharedResources) -> None:
        resolver = Answers({"elsewhere.test": [[PUBLIC]]})
        policy = NetworkPolicy(allowed_hosts=("*.example.com",))
        service = SubrequestService(resources, 50, policy, Network(resolver, LoopbackInternet()))
        body = await fetch(service, "http://elsewhere.test/")
        assert body == (
            "error: Fetch API cannot load: host elsewhere.test is not in the allowed hosts"
            " (network policy)"
        )
        assert resolver.asked == []

    run(tmp_path, test)


def test_a_connection_pooled_under_a_lenient_policy_is_never_lent_to_a_stricter_one(
    tmp_path: Path,
) -> None:
    """Deployments share the supervisor's HTTP client and its pool; the policy is checked when a
    connection is made, so a stricter policy must not find one a lenient policy opened."""
    internal = Site("internal")

    async def test(resources: SharedResources) -> None:
        async with serving(internal) as port:
            network = Network(Answers({"local.test": [["127.0.0.1"]]}), LoopbackInternet())
            lenient = SubrequestService(resources, 50, NetworkPolicy(), network)
            strict = SubrequestService(resources, 50, PLATFORM, network)
            url = f"http://local.test:{port}/"
            assert await fetch(lenient, url) == "internal"
            assert (await fetch(strict, url)).endswith("loopback address (network policy)")
            assert await fetch(lenient, url) == "internal"
            assert len(internal.seen) == 2

    run(tmp_path, test)


def test_https_to_a_pinned_address_still_verifies_the_certificate_against_the_name(
    tmp_path: Path,
) -> None:
    """The socket goes to 127.0.0.1, but TLS (SNI and the certificate check) and the Host
    header name the URL's host: a certificate for that name passes, one for another fails."""
    authority = trustme.CA()
    pem = tmp_path / "server.pem"
    authority.issue_cert("pinned.test").private_key_and_cert_chain_pem.write_to_path(str(pem))
    trusted = ssl.create_default_context()
    authority.configure_trust(trusted)
    site = Site("tls")

    async def test(resources: SharedResources) -> None:
        async with serving(site, ssl_keyfile=str(pem), ssl_certfile=str(pem)) as port:
            loopback = [["127.0.0.1"]]
            resolver = Answers({"pinned.test": loopback, "other.test": loopback})
            network = Network(resolver, LoopbackInternet(), verify=trusted)
            service = SubrequestService(resources, 50, NetworkPolicy(), network)
            assert await fetch(service, f"https://pinned.test:{port}/page") == "tls"
            assert site.seen == [("/page", f"pinned.test:{port}")]
            mismatch = await fetch(service, f"https://other.test:{port}/page")
            assert "CERTIFICATE_VERIFY_FAILED" in mismatch and "other.test" in mismatch
            assert len(site.seen) == 1
            # Close the pooled TLS connection first: a server closing it waits for a TLS
            # close_notify from a client that is not reading (asyncio's 30 s shutdown timeout).
            await resources.aclose()

    run(tmp_path, test)
