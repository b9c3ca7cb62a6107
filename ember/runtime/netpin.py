"""Pinned connections for subrequests: every socket goes to an address the policy checked.

Checking a host and then letting the HTTP client resolve it again to connect leaves a window:
a DNS answer that changes in between (a public address first, 127.0.0.1 or 169.254.169.254
second: rebinding) reaches an address the policy refuses. Here the connection pool dials through
``PinnedBackend``: it resolves the host once with the ``Resolver``, runs the policy on every
address of that answer, and connects to those addresses only, by IP. TLS still names the host
(httpcore passes the URL's host as SNI and as the name the certificate must match) and the
``Host`` header is the URL's, so https verifies against the name, not the address.

The pool keeps connections by origin (scheme, host, port), and every connection in it was dialled
by this backend, so a reused connection goes to an address that was checked for that same host.
One client serves one (policy, network) pair: a connection opened under a lenient policy is
never handed to a stricter one.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import typing
from dataclasses import dataclass, field
from typing import Protocol

import httpcore
import httpx

from ember.bindings.base import ServiceError

# httpx's own defaults (httpx._config.DEFAULT_LIMITS), which its constructor would have used.
_LIMITS = {"max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0}


class Resolver(Protocol):
    """Turns a host name into the addresses to connect to (a seam: tests give changing answers)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """The host's addresses as text, in the order to try them; OSError if it has none."""
        ...


class Policy(Protocol):
    """What the backend asks before it connects (``NetworkPolicy`` is one)."""

    def refusal(self, host: str, addresses: list[str]) -> str | None:
        """Why ``host`` at ``addresses`` is refused, or None; with no addresses, whether the
        name alone is. ``host`` is the name as DNS sees it (IDNA ``xn--`` labels)."""
        ...


@dataclass(frozen=True, slots=True)
class SystemResolver:
    """The operating system's resolver (getaddrinfo, in the event loop's executor)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """See ``Resolver.resolve``."""
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class Network:
    """How subrequests reach the network. The defaults are the real thing; tests swap parts.

    ``dialer`` opens the TCP connection to one checked address (httpcore's anyio backend when
    None); ``verify`` is the TLS context that checks servers' certificates (the CA bundle httpx
    uses when None).
    """

    resolver: Resolver = field(default_factory=SystemResolver)
    dialer: httpcore.AsyncNetworkBackend | None = None
    verify: ssl.SSLContext | None = None


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses ``policy`` allows."""

    def __init__(self, policy: Policy, resolver: Resolver, dialer: httpcore.AsyncNetworkBackend):
        self._policy = policy
        self._resolver = resolver
        self._dialer = dialer

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host`` once, check every address, connect to the first that answers."""
        addresses = await self._checked(host, port, timeout)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._dialer.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # _checked never returns an empty list
        raise failure

    async def sleep(self, seconds: float) -> None:
        """httpcore's pause between retries."""
        await self._dialer.sleep(seconds)

    async def _checked(self, host: str, port: int, timeout: float | None) -> list[str]:
        # A host the policy refuses by name is refused before its name goes out to DNS.
        refusal = self._policy.refusal(host, [])
        if refusal is None:
            try:
                async with asyncio.timeout(timeout):
                    addresses = await self._resolver.resolve(host, port)
            except TimeoutError:
                raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
            except OSError as exc:
                raise ServiceError(
                    f"Network connection lost: cannot resolve {host}: {exc}", kind="type"
                ) from None
            if not addresses:
                raise ServiceError(
                    f"Network connection lost: cannot resolve {host}: no addresses", kind="type"
                )
            refusal = self._policy.refusal(host, addresses)
        if refusal is not None:
            raise ServiceError(f"Fetch API cannot load: {refusal} (network policy)", kind="type")
        return addresses


class _PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport (request and response conversion, exception mapping) over a pool whose
    connections ``PinnedBackend`` dials."""

    def __init__(self, backend: PinnedBackend, verify: ssl.SSLContext | None) -> None:
        context = httpx.create_ssl_context(
            verify=True if verify is None else verify, trust_env=False
        )
        super().__init__(verify=context, trust_env=False)
        # httpx takes no network backend, so the pool it built is replaced by one that has ours.
        # Should a later httpx keep its pool under another name, connections would silently go
        # unpinned: refuse to start instead.
        if not isinstance(getattr(self, "_pool", None), httpcore.AsyncConnectionPool):
            raise RuntimeError("this httpx keeps no _pool; subrequests cannot be pinned")
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context, network_backend=backend, **_LIMITS
        )


def pinned_transport(policy: Policy, network: Network) -> httpx.AsyncBaseTransport:
    """An httpx transport whose every connection goes to an address ``policy`` allows."""
    dialer = network.dialer or httpcore.AnyIOBackend()
    return _PinnedTransport(PinnedBackend(policy, network.resolver, dialer), network.verify)
