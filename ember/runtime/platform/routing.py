"""Which worker a request is for: by Host name, or by path, and the live routes.

Three ways to name a worker on ``ember serve``'s one port:

- ``Host: <worker>.<account>.localhost[:port]``: the URL ember prints. Browsers and curl resolve
  every ``*.localhost`` name to the loopback address, so ``http://hello.acme.localhost:8787/``
  opens in a browser with no DNS setup.
- ``Host: <worker>.<account>.workers.dev``: the workers.dev-style hostname. wrangler prints the
  hostname of the URL the API gives it without scheme or port (``hello.acme.localhost``), or
  ``https://<worker>.<subdomain>.workers.dev`` when it builds one itself from the account's
  subdomain (which is the account's name here); either name, sent as the Host header to ember's
  port, reaches the worker.
- ``/w/<account>/<worker>/<path>`` for clients that cannot set Host: the worker sees ``/<path>``.

Anything else goes to the control API. Routes map (account name, worker name) to the slots of
the live deployment's versions (two, with percentages, during a gradual deployment); replacing a
route is one dict assignment, so a request sees either the old deployment or the new one.
A temporary account's routes carry its expiry and are not found from that instant on: the sweep
that deletes the account runs every ``--gc-interval`` seconds, and until it does the workers
must already answer as deleted ones do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

HOST_SUFFIXES = (".localhost", ".workers.dev")
PATH_PREFIX = "/w/"


@dataclass(frozen=True)
class WorkerRoute:
    """The live deployment of one worker: (slot id, percentage) pairs, and when its account
    expires (a temporary one's; None: never)."""

    account_name: str
    script_name: str
    targets: tuple[tuple[str, float], ...]
    expires_at: float | None = None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def pick(self, chance: float | None = None) -> str:
        """The slot for one request (weighted by percentage when there are two)."""
        if len(self.targets) == 1:
            return self.targets[0][0]
        point = (random.random() if chance is None else chance) * 100.0
        for slot, percentage in self.targets:
            if point < percentage:
                return slot
            point -= percentage
        return self.targets[-1][0]


class RouteTable:
    """(account name, worker name) -> WorkerRoute; an expired route is not found (``clock``:
    the control plane's, which account expiries are in)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._routes: dict[tuple[str, str], WorkerRoute] = {}
        self._clock = clock

    def get(self, account_name: str, script_name: str) -> WorkerRoute | None:
        route = self._routes.get((account_name, script_name))
        return None if route is None or route.expired(self._clock()) else route

    def set(self, route: WorkerRoute) -> None:
        self._routes[(route.account_name, route.script_name)] = route

    def remove(self, account_name: str, script_name: str) -> WorkerRoute | None:
        return self._routes.pop((account_name, script_name), None)

    def __iter__(self) -> Iterator[WorkerRoute]:
        now = self._clock()
        return iter([route for route in self._routes.values() if not route.expired(now)])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def worker_of_host(host: str, extra_suffixes: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """``hello.acme.localhost:8787`` -> ("acme", "hello"); None if the host names no worker."""
    name = host.strip().lower()
    if name.startswith("["):  # an IPv6 literal
        return None
    name = name.rsplit(":", 1)[0] if ":" in name else name
    name = name.rstrip(".")
    for suffix in (*HOST_SUFFIXES, *extra_suffixes):
        if name.endswith(suffix):
            labels = name[: -len(suffix)].split(".")
            if len(labels) == 2 and all(labels):
                worker, account = labels
                return account, worker
    return None


def host_header(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            return value.decode("latin-1")
    return ""


def split_worker_path(scope: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """``/w/acme/hello/x?y`` -> ("acme", "hello", scope for ``/x?y``); None if not such a path."""
    path: str = scope.get("path", "")
    if not path.startswith(PATH_PREFIX):
        return None
    pieces = path[len(PATH_PREFIX) :].split("/", 2)
    if len(pieces) < 2 or not pieces[0] or not pieces[1]:
        return None
    account, worker = pieces[0].lower(), pieces[1]
    rest = "/" + (pieces[2] if len(pieces) == 3 else "")
    raw: bytes = scope.get("raw_path") or path.encode()
    raw_pieces = raw[len(PATH_PREFIX) :].split(b"/", 2)
    raw_rest = b"/" + (raw_pieces[2] if len(raw_pieces) == 3 else b"")
    inner = dict(scope)
    inner["path"] = rest
    inner["raw_path"] = raw_rest
    inner["root_path"] = scope.get("root_path", "") + f"{PATH_PREFIX}{pieces[0]}/{pieces[1]}"
    return account, worker, inner
