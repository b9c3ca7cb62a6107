"""Subrequests: ``fetch()`` from a handler, made by the supervisor with httpx.

The isolate never opens a socket of its own: ``fetch`` is a call on its channel, counted against
the deployment's subrequest limit and checked against a ``NetworkPolicy`` at every hop
(redirects included). The response body streams back with credit, so a huge download never
sits in the supervisor's memory.

The check is made where the connection is made (``ember.runtime.netpin``): each new connection
resolves its host once, the policy sees every address of that answer, and the socket goes to
one of those addresses, so a DNS answer that changes after the check (rebinding) reaches
nothing the policy refused. A redirect to another host opens a new connection, checked the same
way.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import httpx

from ember.bindings.base import BindingService, CallContext, ServiceError, StreamReply
from ember.errors import LimitExceeded
from ember.runtime.inflate import decodable, inflated
from ember.runtime.limits import SUBREQUESTS_EXCEEDED_MESSAGE
from ember.runtime.netpin import Network, pinned_transport
from ember.runtime.services import SharedResources
from ember.runtime.worker_loops import LOOP_HEADER

HTTP_CLIENT_KEY = "http.client"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_DROPPED = {"content-encoding", "content-length", "transfer-encoding", "connection"}
MAX_REDIRECTS = 20
MAX_URL_SHOWN = 2048  # of a URL quoted in an error (the handler's own, but it may be huge)
# What a subrequest (fetch() or a client library's) asks for unless the handler set its own:
# named here rather than left to httpx, whose default changes with the packages it finds
# installed (zstd, which nothing here decodes, among them). Not br, though workerd's fetch()
# asks for it and the isolate decodes it: a br body passed on unread reached clients that did
# not accept br (curl without --compressed) still encoded, since the edge decodes only gzip (a
# br decoder's window, up to 16 MiB an upstream picks, is not for the shared front; review20).
# A handler that asks for br gets it, decoded in the isolate; a client library that asks for
# it decodes it itself (the supervisor decodes no br: inflate.py).
ACCEPT_ENCODING = "gzip, deflate"
# Codings fetch() decodes in the isolate, as workerd does (gzip; br with its
# brotli_content_encoding flag, on by default since 2024-04-29): they pass still encoded.
ISOLATE_CODINGS = ("gzip", "br")


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    """Which destinations a subrequest may reach. ``ember dev`` allows everything."""

    allow_loopback: bool = True
    allow_private: bool = True
    allow_public: bool = True
    # Glob patterns over the host as DNS sees it (IDNA "xn--" labels); empty means any host.
    allowed_hosts: tuple[str, ...] = ()

    def refusal(self, host: str, addresses: list[str]) -> str | None:
        """Why ``host`` (resolved to ``addresses``) is refused, or None if it is allowed."""
        if self.allowed_hosts and not any(fnmatch.fnmatch(host, p) for p in self.allowed_hosts):
            return f"host {host} is not in the allowed hosts"
        for text in addresses:
            address = _reached(ipaddress.ip_address(text.split("%")[0]))
            if address.is_loopback or address.is_unspecified:  # 0.0.0.0 reaches this host
                if not self.allow_loopback:
                    return f"{host} resolves to a loopback address"
            elif address.is_global and not address.is_multicast:
                if not self.allow_public:
                    return f"{host} resolves to a public address"
            elif not self.allow_private:
                # Everything not globally routable: private and link-local ranges, but also
                # carrier-grade NAT (100.64/10, where some clouds keep their metadata service),
                # benchmarking, reserved and multicast ranges.
                return f"{host} resolves to a private or reserved address ({address})"
        return None


_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def _reached(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries to (IPv4-mapped, NAT64, 6to4), else itself: a
    NAT64 gateway sends ``64:ff9b::7f00:1`` to 127.0.0.1, which Python calls global."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    high = int(address) >> 32
    if high == 0xFFFF0000 or (high == 0 and not (address.is_loopback or address.is_unspecified)):
        # IPv4-translated (::ffff:0:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return address  # Teredo (2001::/32) is not global: refused as reserved


class SubrequestService(BindingService):
    """``fetch`` for one deployment: ``[method, url, headers, redirect, body]`` -> head + stream."""

    def __init__(
        self,
        resources: SharedResources,
        limit: int,
        policy: NetworkPolicy,
        network: Network | None = None,
    ) -> None:
        self._resources = resources
        self._limit = limit
        self._policy = policy
        self._network = network or Network()

    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object | StreamReply:
        """Make the request and stream its response back."""
        if method != "fetch" or not isinstance(args, list) or len(args) not in (5, 6):
            raise ServiceError("malformed fetch call", kind="type")
        http_method, url, headers, redirect, body = args[:5]
        # fetch() (not the client libraries, which decode for themselves) takes a gzip- or
        # br-encoded answer still encoded, as workerd does: it decodes on reading, passes it
        # on unread.
        keep_coded = len(args) == 6 and args[5] is True
        if not isinstance(http_method, str) or not isinstance(url, str):
            raise ServiceError("malformed fetch call", kind="type")
        count = ctx.count("subrequests")
        if count > self._limit:
            raise LimitExceeded("subrequests", count, self._limit, SUBREQUESTS_EXCEEDED_MESSAGE)
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
        except ValueError as exc:  # "http://[::1/": Invalid IPv6 URL
            raise _cannot_load(url, exc) from None
        if parts.scheme not in ("http", "https") or not hostname:
            raise ServiceError(f"Fetch API cannot load: {url}", kind="type")
        # The policy lives in the client's connections, so each (policy, network) has its own.
        client: httpx.AsyncClient = self._resources.shared(
            (HTTP_CLIENT_KEY, self._policy, self._network),
            lambda: _make_client(self._policy, self._network),
        )
        content: Any = body if isinstance(body, bytes) else ctx.upload
        try:
            # The loop limit's count, set here whatever the worker sent (redirects keep it).
            sent = [(str(k), str(v)) for k, v in headers if str(k).lower() != LOOP_HEADER]
            sent.append((LOOP_HEADER, str(ctx.loops_left)))
            if not any(name.lower() == "accept-encoding" for name, _ in sent):
                sent.append(("accept-encoding", ACCEPT_ENCODING))
            request = client.build_request(http_method, url, headers=sent, content=content)
        except (httpx.InvalidURL, ValueError) as exc:  # an IDNA label, an IPv4 httpx refuses
            raise _cannot_load(url, exc) from None
        try:
            response = await self._send(client, request, redirect)
        except httpx.HTTPError as exc:
            raise ServiceError(
                f"Network connection lost: {type(exc).__name__}: {exc}", kind="type"
            ) from None
        except (httpx.InvalidURL, UnicodeError) as exc:  # a redirect to such a URL
            raise _cannot_load(str(request.url), exc) from None
        encoded = keep_coded and _isolate_decodes(response)
        coding = "" if encoded else decodable(response)
        kept = encoded or coding is None  # the body passes still encoded, with its header
        head = {
            "status": response.status_code,
            "statusText": response.reason_phrase,
            "headers": [
                [k, v]
                for k, v in response.headers.multi_items()
                if k.lower() not in _DROPPED or (kept and k.lower() == "content-encoding")
            ],
            "url": str(response.url),
            "redirected": bool(response.history),
        }
        length = _known_length(http_method, response, kept)
        return StreamReply(head=head, chunks=_body(response, coding), length=length)

    async def _send(self, client: Any, request: Any, redirect: object) -> Any:
        for _ in range(MAX_REDIRECTS + 1):
            response = await client.send(request, stream=True, follow_redirects=False)
            # A 3xx without a Location (a 304, a bare 301) has nowhere to go: returned as is.
            if not response.has_redirect_location or redirect == "manual":
                return response
            if redirect == "error":
                await response.aclose()
                raise ServiceError("Fetch API cannot load: redirect mode is 'error'", kind="type")
            next_request = response.next_request
            await response.aclose()
            request = next_request
        raise ServiceError("Fetch API cannot load: too many redirects", kind="type")


def _isolate_decodes(response: httpx.Response) -> bool:
    """Whether the answer is under one coding that fetch() decodes in the isolate."""
    values = response.headers.get_list("content-encoding")
    return len(values) == 1 and values[0].strip().lower() in ISOLATE_CODINGS


def _known_length(method: str, response: httpx.Response, encoded: bool = False) -> int | None:
    """The body's length as the upstream announced it (its Content-Length), when the worker
    gets those very bytes: not decoded from a Content-Encoding (its length is then unknown),
    and not for HEAD or a status without a body, whose Content-Length describes no bytes here.
    A response passed through unread goes out with it, as workerd sends a known length."""
    if method.upper() == "HEAD" or response.status_code in (204, 304) or response.status_code < 200:
        return None
    if not encoded and response.headers.get("content-encoding", "identity").lower() != "identity":
        return None
    declared = response.headers.get_list("content-length")
    if len(set(declared)) != 1 or not declared[0].isdigit():
        return None
    return int(declared[0])


def _cannot_load(url: str, exc: Exception) -> ServiceError:
    """The handler's TypeError for a URL the client cannot use, naming it and what is wrong
    (workerd's "Fetch API cannot load: URL"); not an internal error with a traceback on the
    operator's log."""
    shown = url if len(url) <= MAX_URL_SHOWN else url[:MAX_URL_SHOWN] + "..."
    return ServiceError(f"Fetch API cannot load: {shown} ({exc})", kind="type")


def _make_client(policy: NetworkPolicy, network: Network) -> httpx.AsyncClient:
    # One client serves every deployment's subrequests (its connection pool is worth sharing),
    # so it must keep no state between them: Workers' fetch has no cookie jar, and a jar here
    # would hand one tenant's session cookies to another's requests.
    return httpx.AsyncClient(
        transport=pinned_transport(policy, network),
        timeout=httpx.Timeout(60.0, connect=10.0),
        trust_env=False,
        cookies=CookieJar(policy=_NoCookies()),
        # Each request names its own (see ACCEPT_ENCODING); this is httpx's default replaced.
        headers={"accept-encoding": ACCEPT_ENCODING},
    )


class _NoCookies(DefaultCookiePolicy):
    """A cookie policy that stores nothing and sends nothing."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


async def _body(response: Any, coding: str | None) -> AsyncIterator[bytes]:
    """The body as the isolate gets it: decoded here (in bounded pieces) from a zlib coding,
    else as it came (not encoded, gzip or br kept for fetch(), or a coding not decoded here)."""
    raw = response.aiter_raw()
    try:
        async for chunk in inflated(raw, coding) if coding else raw:
            yield chunk
    finally:
        await response.aclose()
