"""Supervisor half of ``env.ASSETS``: ``fetch(method, url, headers)`` answered from the files.

The directory comes from the spec (the project's in ``ember dev``, the deployed version's copy
in ``ember serve``); the isolate names only a URL, which ``serving.answer`` keeps inside it.
Small files travel in the reply; larger ones stream in chunks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ember.bindings.assets.files import AssetDirectory, ManifestAssets
from ember.bindings.assets.prefix import under_prefix
from ember.bindings.assets.rule_source import FixedRules, LiveRules, RulesSource
from ember.bindings.assets.serving import MAX_PATH, URI_TOO_LONG, AssetsPolicy, answer
from ember.bindings.base import (
    BindingService,
    BindingSpec,
    CallContext,
    ServiceError,
    ServiceHost,
    StreamReply,
)

INLINE_BYTES = 256 * 1024
CHUNK = 256 * 1024
MAX_HEADERS = 256
# One deployment's answers on threads at once; its other calls wait their turn (none fails).
# Unbounded, 8 calls with long paths took every thread of the process's executor, where the
# other tenants' asset reads queue (review18).
MAX_CONCURRENT = 4


class AssetsService(BindingService):
    """Answers ``fetch`` for one deployment's assets."""

    def __init__(self, spec: BindingSpec, host: ServiceHost) -> None:
        self._name = spec.name
        directory = Path(str(spec.options["directory"]))
        manifest = spec.options.get("manifest")
        # A deployed version's files answer by its manifest (as in front of its worker, same
        # ETags); ember dev's directory is read live.
        self._lookup = (
            ManifestAssets(json.loads(Path(str(manifest)).read_text()), directory).lookup
            if manifest
            else AssetDirectory(directory).lookup
        )
        html = str(spec.options.get("html_handling", "auto-trailing-slash"))
        # The rules of the assets in front of the worker, shared through the spec: compiled
        # on a thread, once for both (a deployed version's at the first asset request of
        # either, ember dev's again after an edit); parsing them here ran on the serving loop
        # (review17), and ember dev compiled an edit once for each.
        shared = spec.private.get("rules")
        self.rules: RulesSource
        if isinstance(shared, RulesSource):
            self.rules = shared
        elif manifest:
            self.rules = FixedRules()
        else:  # a spec made without its site's rules: the directory's own, read live
            self.rules = LiveRules(directory, html)
        self._gate = asyncio.Semaphore(MAX_CONCURRENT)
        self._policy = AssetsPolicy(
            html_handling=str(spec.options.get("html_handling", "auto-trailing-slash")),
            not_found_handling=str(spec.options.get("not_found_handling", "none")),
            has_worker=False,  # the asset worker itself: it answers every request
        )

    async def call(self, method: str, args: list[Any], ctx: CallContext) -> object | StreamReply:
        if method != "fetch":
            raise ServiceError(f"env.{self._name}: unknown method {method!r}", kind="assets")
        if not (
            len(args) == 3
            and isinstance(args[0], str)
            and isinstance(args[1], str)
            and isinstance(args[2], list)
            and len(args[2]) <= MAX_HEADERS
            and all(
                isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
                for h in args[2]
            )
        ):
            raise ServiceError(
                f"env.{self._name}.fetch(): expected a method, a URL and headers", kind="assets"
            )
        verb, url, pairs = args
        parts = urlsplit(url)
        headers = {name.lower(): value for name, value in pairs}
        # The URL's host, as the asset worker reads it, for an https://host/... _headers rule.
        headers["host"] = parts.netloc
        path = parts.path or "/"
        if len(path) > MAX_PATH:  # refused here: never a thread, nor a turn, for it
            return [URI_TOO_LONG.status, [list(h) for h in URI_TOO_LONG.headers], URI_TOO_LONG.body]
        async with self._gate:
            rules = await self.rules.get()
            found = await asyncio.to_thread(
                answer,
                verb,
                path,
                parts.query,
                headers,
                self._policy,
                self._lookup,
                rules,
            )
        # A redirect keeps the prefix the worker's request came by, as in front of the worker.
        found = under_prefix(found, ctx.root_path)
        head = [found.status, [list(h) for h in found.headers]]
        if found.file is None:
            return [*head, found.body]
        try:
            size = found.file.stat().st_size - found.offset
            if found.length is not None:
                size = min(size, found.length)
            if size <= INLINE_BYTES:
                data = await asyncio.to_thread(_read, found.file, found.offset, size)
                return [*head, data]
        except OSError:
            return [*head, b""]
        return StreamReply(head=[*head, None], chunks=_chunks(found.file, found.offset, size))


def _read(file: Path, offset: int, size: int) -> bytes:
    with file.open("rb") as handle:
        handle.seek(offset)
        return handle.read(size)


async def _chunks(file: Path, offset: int, size: int) -> AsyncIterator[bytes]:
    """``size`` bytes from ``offset`` (a range reads only its own bytes)."""
    with file.open("rb") as handle:
        handle.seek(offset)
        while size > 0 and (chunk := await asyncio.to_thread(handle.read, min(CHUNK, size))):
            size -= len(chunk)
            yield chunk
