"""Static assets in front of the worker: the ASGI layer ``ember dev`` and ``ember serve`` share.

For each HTTP request, the deployment's assets (``ember.bindings.assets.serving.route``) either
answer it, the file streamed from disk, or hand it to the worker's app unchanged. ``site``
names the assets of the request's deployment now (``ember dev``: the project's, re-read on a
config reload; ``ember serve``: the routed version's), or None where there are none. A
redirect keeps the path prefix the request came by (``root_path``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ember.bindings.assets.intent import Lookup
from ember.bindings.assets.prefix import under_prefix
from ember.bindings.assets.rule_source import FixedRules, RulesSource
from ember.bindings.assets.rules import AssetRules
from ember.bindings.assets.serving import AssetAnswer, AssetsPolicy, route

CHUNK = 256 * 1024
# Threads that read the assets' files for the front: its own, so a large file's chunks never
# queue behind work on asyncio's default executor (tenants' env.ASSETS rule work: review18).
READ_THREADS = 4
Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AssetSite:
    """One deployment's assets: how they answer, and where their files are found."""

    policy: AssetsPolicy
    lookup: Lookup
    # Its ``_redirects`` and ``_headers`` (ember serve: compiled at the first asset request;
    # ember dev: again when edited), compiled off the event loop.
    rules: RulesSource = field(default_factory=FixedRules)

    def claims_all(self) -> bool:
        """True when every request may be answered here (no worker): the fast path, which
        knows only the worker, must hand each one to the ASGI app."""
        return not self.policy.has_worker or self.policy.not_found_handling != "none"


def asset_reads() -> Executor:
    """The front's own pool for reading asset files (``send_answer``'s ``reads``)."""
    return ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="ember-asset-read")


def with_assets(app: Any, site: Callable[[Scope], AssetSite | None]) -> Any:
    """``app`` with static assets in front of it."""
    reads = asset_reads()

    async def dispatch(scope: Scope, receive: Any, send: Send) -> None:
        if scope["type"] == "http" and (current := site(scope)) is not None:
            found = assets_route(scope, current, await current.rules.get())
            if found is not None:
                await send_answer(found, send, reads)
                return
        await app(scope, receive, send)

    return dispatch


def assets_route(scope: Scope, site: AssetSite, rules: AssetRules) -> AssetAnswer | None:
    """The assets' answer to the HTTP request ``scope`` under ``rules`` (the site's, got);
    None: the worker's to answer."""
    found = route(
        scope["method"],
        _raw_path(scope),
        scope.get("query_string", b"").decode("latin-1"),
        _headers(scope),
        site.policy,
        site.lookup,
        rules,
    )
    # The router took the request's prefix off (``ember serve``'s ``/w/<account>/<worker>``).
    return None if found is None else under_prefix(found, scope.get("root_path", ""))


async def send_answer(found: AssetAnswer, send: Send, reads: Executor | None = None) -> None:
    """Write ``found`` as an ASGI response, its file read in chunks (a large one on ``reads``;
    None: asyncio's default executor)."""
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in found.headers]
    if found.file is None and found.status not in (304,) and not _has(found, "content-length"):
        headers.append((b"content-length", b"0"))
    await send({"type": "http.response.start", "status": found.status, "headers": headers})
    if found.file is None:
        await send({"type": "http.response.body", "body": found.body})
        return
    big = int(dict(found.headers).get("content-length", "0")) > CHUNK
    try:
        handle = found.file.open("rb")
    except OSError:  # removed since it was looked up: what was announced cannot be sent
        await send({"type": "http.response.body", "body": b""})
        return
    with handle:
        # A range: only its bytes are read, never the whole file.
        left = found.length if found.length is not None else -1
        if found.offset:
            handle.seek(found.offset)
        while True:
            size = CHUNK if left < 0 else min(CHUNK, left)
            # A large file is read off the event loop (ember serve's loop serves every tenant).
            if big:
                chunk = await asyncio.get_running_loop().run_in_executor(reads, handle.read, size)
            else:
                chunk = handle.read(size)
            left -= len(chunk) if left >= 0 else 0
            more = len(chunk) == size and left != 0
            await send({"type": "http.response.body", "body": chunk, "more_body": more})
            if not more:
                return


def _has(found: AssetAnswer, name: str) -> bool:
    return any(k == name for k, _ in found.headers)


def _raw_path(scope: Scope) -> str:
    raw = scope.get("raw_path")
    if raw:
        return raw.decode("latin-1").split("?", 1)[0]
    return str(scope["path"])


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
