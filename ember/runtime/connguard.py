"""Bounds on client connections: a deadline for each request head, caps on open connections.

A walkthrough held 20,000 connections to ``ember serve`` open with no token at all: each sent a
request line and then one header line every 10 s, which uvicorn waits for for ever. Honest
clients timed out and, once the process ran out of file descriptors, asyncio logged a traceback
per failed accept (70 MB of log in 40 s). This module holds what nginx and Cloudflare do about it:

- ``head_timeout_s``: the whole request head (line and headers) must arrive within it, counted
  from the connection's start or the first byte of a later request (nginx's
  ``client_header_timeout``, 60 s). Past it the connection is closed, with ``408`` if part of a
  head had arrived (RFC 9110 15.5.9: the client may retry on a new connection), silently if
  nothing had (an idle connection a browser opened ahead of time: a 408 there could be read
  as the answer to the request it sends next);
- ``keepalive_timeout_s``: an idle keep-alive connection between requests (uvicorn's
  ``timeout_keep_alive``);
- ``body_timeout_s`` and ``body_min_rate``: the request body must arrive within
  ``body_timeout_s`` of the end of its head, plus a second for every ``body_min_rate`` bytes
  that came, else ``408`` and close (``bodyclock.py`` says why a rate and not nginx's
  ``client_body_timeout`` gap between reads);
- ``max_connections`` in total and ``max_connections_per_address`` from one client address:
  past them a new connection is answered at once, ``429`` for its address's share, ``503`` for
  the server's, and closed, before its request is read (nginx ``limit_conn``). The total
  defaults to half the process's open-file limit, so the other half stays for isolates,
  stores and sockets to the model servers.

``ConnectionGate`` keeps the counts; ``httphead.BoundedHeadProtocol`` applies them. Every
refusal, of a connection or of a request (its head or body late: 408, its head or trailers too
large: 431), is counted in ``ConnectionGate.refusals`` (``ember serve --metrics-port``'s
``ember_http_refusals_total``) and said through the gate's log, one line per kind per interval:
a slow-loris flood is a count, not a line per connection.
"""

from __future__ import annotations

import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ember.runtime.client_key import client_key
from ember.runtime.deployments.config_parse import (
    duration_value,
    mapping,
    only_keys,
    positive_int,
    size_value,
)

DEFAULT_HEAD_TIMEOUT_S = 60  # nginx client_header_timeout
DEFAULT_BODY_TIMEOUT_S = 60  # nginx client_body_timeout's number, for the whole body
# 64 kbit/s, an old phone's uplink: a 100 MiB upload may take 3.6 hours, yet a client must
# send 8 KiB a second to hold a connection open past body_timeout (bodyclock.py)
DEFAULT_BODY_MIN_RATE = 8 * 1024
DEFAULT_KEEPALIVE_TIMEOUT_S = 5  # uvicorn's timeout_keep_alive, what ember used before
DEFAULT_MAX_PER_ADDRESS = 256  # a browser opens 6 per origin; leave room for NAT-shared addresses
MAX_DEFAULT_CONNECTIONS = 16384


def default_max_connections() -> int:
    """Half the soft open-file limit (the rest for isolates, stores, pool sockets), at least 64."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_DEFAULT_CONNECTIONS
    return max(64, min(MAX_DEFAULT_CONNECTIONS, soft // 2))


@dataclass(frozen=True)
class SettingNames:
    """What the answers past a deadline call its setting: ``ember serve``'s config keys, or
    ``ember models serve``'s flags."""

    head_timeout: str = "server.head_timeout"
    body_timeout: str = "server.body_timeout"
    body_min_rate: str = "server.body_min_rate"


MODEL_SERVER_NAMES = SettingNames(
    head_timeout="the model server's head deadline",
    body_timeout="--body-timeout",
    body_min_rate="--body-min-rate",
)


@dataclass(frozen=True)
class ConnectionLimits:
    """The ``server:`` section of ``ember serve``'s config (``ember dev`` uses the defaults;
    ``ember models serve`` its ``--body-timeout`` and ``--body-min-rate``)."""

    head_timeout_s: int = DEFAULT_HEAD_TIMEOUT_S
    body_timeout_s: int = DEFAULT_BODY_TIMEOUT_S
    body_min_rate: int = DEFAULT_BODY_MIN_RATE  # bytes a second
    keepalive_timeout_s: int = DEFAULT_KEEPALIVE_TIMEOUT_S
    max_connections: int = field(default_factory=default_max_connections)
    max_connections_per_address: int = DEFAULT_MAX_PER_ADDRESS
    names: SettingNames = SettingNames()

    def line(self) -> str:
        """The banner's line: what a client may hold open, and for how long."""
        return (
            f"connections: at most {self.max_connections} open (server.max_connections), "
            f"{self.max_connections_per_address} per client address "
            f"(server.max_connections_per_address); a request head must arrive within "
            f"{self.head_timeout_s:g} s (server.head_timeout), a request body within "
            f"{self.body_timeout_s:g} s of it plus 1 s per {_size(self.body_min_rate)} received "
            f"(server.body_timeout, server.body_min_rate), idle keep-alive connections "
            f"close after {self.keepalive_timeout_s:g} s (server.keepalive_timeout)"
        )


def parse_connection_limits(section: Any, source: str) -> ConnectionLimits:
    """The ``server:`` mapping of ``ember serve``'s config (absent or null: the defaults).

    server:
      head_timeout: 60s                 # the whole request line and headers
      body_timeout: 60s                 # the whole body, counted from the end of its head,
      body_min_rate: 8KiB               # ... plus 1 s for every this many bytes received
      keepalive_timeout: 5s             # an idle connection between requests
      max_connections: 4096             # default: half the open-file limit
      max_connections_per_address: 256
    """
    raw = mapping(section if section is not None else {}, source, "server")
    where = "server"
    only_keys(
        raw,
        source,
        where,
        {
            "head_timeout",
            "body_timeout",
            "body_min_rate",
            "keepalive_timeout",
            "max_connections",
            "max_connections_per_address",
        },
    )
    defaults = ConnectionLimits()
    return ConnectionLimits(
        head_timeout_s=duration_value(raw, "head_timeout", DEFAULT_HEAD_TIMEOUT_S, source, where),
        body_timeout_s=duration_value(raw, "body_timeout", DEFAULT_BODY_TIMEOUT_S, source, where),
        body_min_rate=size_value(raw, "body_min_rate", DEFAULT_BODY_MIN_RATE, source, where),
        keepalive_timeout_s=duration_value(
            raw, "keepalive_timeout", DEFAULT_KEEPALIVE_TIMEOUT_S, source, where
        ),
        max_connections=positive_int(
            raw, "max_connections", defaults.max_connections, source, where
        ),
        max_connections_per_address=positive_int(
            raw, "max_connections_per_address", DEFAULT_MAX_PER_ADDRESS, source, where
        ),
    )


def _size(count: int) -> str:
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"


@dataclass(frozen=True)
class Refusal:
    """Why a new connection was turned away: its answer and the line counted for the log."""

    status: int
    reason: str
    message: str


class ConnectionGate:
    """Counts open connections in total and per client address; admits or refuses new ones.

    Connections are keyed by their transport: a connection upgraded to a WebSocket leaves the
    HTTP protocol that counted it (which then never hears it close), so closed transports are
    pruned whenever a count reaches its cap, rather than trusted to say goodbye.
    """

    def __init__(self, limits: ConnectionLimits, log: RateLimitedLog | None = None) -> None:
        self.limits = limits
        self.log = log
        # (status, reason) -> refusals so far; the reason names the bound (its config key)
        self.refusals: Counter[tuple[int, str]] = Counter()
        self._by_address: dict[str, set[Any]] = {}
        self._open: set[Any] = set()

    def admit(self, transport: Any, address: str | None) -> Refusal | None:
        """Count ``transport`` in, or say why not (nothing counted then)."""
        key = client_key(address or "")  # an IPv6 client by its /64
        mine = self._by_address.get(key)
        if mine is not None and len(mine) >= self.limits.max_connections_per_address:
            _prune(mine)
            if len(mine) >= self.limits.max_connections_per_address:
                return self._refused(
                    Refusal(
                        429,
                        "Too Many Requests",
                        f"{len(mine)} connections from your address are open, the most this "
                        "server allows (server.max_connections_per_address); close one",
                    ),
                    "max_connections_per_address",
                    "per-address cap",
                )
        if len(self._open) >= self.limits.max_connections:
            self._prune_all()
            if len(self._open) >= self.limits.max_connections:
                return self._refused(
                    Refusal(
                        503,
                        "Service Unavailable",
                        f"the server holds {len(self._open)} open connections, its most "
                        "(server.max_connections); retry shortly",
                    ),
                    "max_connections",
                    "total cap",
                )
        self._open.add(transport)
        self._by_address.setdefault(key, set()).add(transport)
        return None

    def release(self, transport: Any, address: str | None) -> None:
        key = client_key(address or "")  # an IPv6 client by its /64
        self._open.discard(transport)
        mine = self._by_address.get(key)
        if mine is not None:
            mine.discard(transport)
            if not mine:
                del self._by_address[key]

    def open_count(self, address: str | None = None) -> int:
        if address is None:
            return len(self._open)
        return len(self._by_address.get(address, ()))

    def refused_request(self, status: int, reason: str, said: str) -> None:
        """A request the protocol refused (``reason``: the bound, ``said``: it in the log)."""
        self.refusals[(status, reason)] += 1
        if self.log is not None:
            self.log.note(f"refused requests ({said}, {status})")

    def _refused(self, refusal: Refusal, reason: str, cap: str) -> Refusal:
        self.refusals[(refusal.status, reason)] += 1
        if self.log is not None:
            self.log.note(f"refused connections ({cap}, {refusal.status})")
        return refusal

    def _prune_all(self) -> None:
        _prune(self._open)
        for key in [k for k, s in self._by_address.items() if not _prune(s)]:
            del self._by_address[key]


class UncappedGate(ConnectionGate):
    """A gate that times heads and bodies but turns no connection away: ``ember models
    serve``'s, whose client is the pool, opening up to 4096 connections to a replica, all from
    one address (what caps a model server is its ``--max-running-requests``)."""

    def admit(self, transport: Any, address: str | None) -> Refusal | None:
        self._open.add(transport)
        return None

    def release(self, transport: Any, address: str | None) -> None:
        self._open.discard(transport)


def _prune(transports: set[Any]) -> set[Any]:
    for transport in [t for t in transports if t.is_closing()]:
        transports.discard(transport)
    return transports


class RateLimitedLog:
    """One line per kind of event per ``interval_s``, with how many there were.

    The first event of a kind is said at once; later ones within the interval are counted and
    said together when it ends (a flood of refused or failed accepts is one line, not one
    traceback each).
    """

    def __init__(
        self,
        say: Callable[[str], None],
        call_later: Callable[[float, Callable[[], None]], Any],
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._say = say
        self._call_later = call_later
        self.interval_s = interval_s
        self._clock = clock
        self._pending: dict[str, int] = {}
        self._flushing: set[str] = set()

    def note(self, kind: str) -> None:
        if kind in self._flushing:
            self._pending[kind] = self._pending.get(kind, 0) + 1
            return
        self._say(f"{kind}: 1 (further ones are counted for {self.interval_s:g} s)")
        self._flushing.add(kind)
        self._call_later(self.interval_s, lambda: self._flush(kind))

    def _flush(self, kind: str) -> None:
        count = self._pending.pop(kind, 0)
        if count == 0:
            self._flushing.discard(kind)
            return
        self._say(f"{kind}: {count} more in the last {self.interval_s:g} s")
        self._call_later(self.interval_s, lambda: self._flush(kind))


ACCEPT_FAILED = "socket.accept() out of system resource"


def accept_error_handler(
    log: RateLimitedLog, previous: Callable[[Any, dict[str, Any]], None] | None
) -> Callable[[Any, dict[str, Any]], None]:
    """An asyncio exception handler saying failed accepts (EMFILE, ENFILE, ENOBUFS, ENOMEM)
    through ``log``; asyncio calls its handler with a traceback once per failed accept, up to
    the listener's backlog (2048) times a second. Everything else goes where it went before."""

    def handle(loop: Any, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_FAILED:
            error = context.get("exception")
            reason = getattr(error, "strerror", None) or str(error)
            log.note(f"could not accept connections ({reason})")
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    return handle
