"""Worker uploads off the event loop, one at a time per worker.

The platform serves every tenant from one event loop. A Worker upload may carry up to 10,000
modules: parsing the multipart body, validating and hashing the modules, storing them (one SQLite
transaction) and writing the version's files to disk took ~1.3 s of that loop for 1.4 MB of
small modules, during which no other tenant was answered. ``Uploads`` runs that work on its own
small thread pool instead:

- **Threads, not the loop.** ``store_upload`` (parse, validate, store, write out) runs in
  ``Uploads``' executor. Its own pool, not asyncio's default one, which ``process.wait`` calls
  can fill, and sized small so that concurrent uploads queue instead of taking every core.
  The control plane's ``Database`` is made for this: one connection opened with
  ``check_same_thread=False``, every use under its lock. Loop-side queries wait for that lock
  only while an upload's transaction runs (tens of ms for 10,000 modules), not while it parses
  or writes files, which happen outside the transaction.
- **Order.** Before, an upload ran start to end on the loop, so two uploads of one worker were
  stored in the order their bodies arrived, and each was made live before the next was stored.
  ``worker()`` keeps that: a FIFO lock per (account, worker) held from storing the version
  until it is live (or prepared), so version numbers and deployments follow arrival order and
  a later upload can never be deployed under an earlier one (which the deploy step would
  otherwise tag as a rollback).
- **Seam.** ``store`` is a typed seam (``StoreUpload``): tests wrap ``store_upload`` to hold an
  upload mid-way and show that other tenants are answered meanwhile. Static asset uploads
  (``store_assets``, forms of up to 64 MiB) run on the same threads, behind ``StoreAssets``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from ember.runtime.deployments.multipart import parse_multipart
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Account
from ember.runtime.deployments.scripts import UploadResult
from ember.runtime.deployments.upload import parse_worker_upload
from ember.storage import StorageFull

P = ParamSpec("P")
R = TypeVar("R")

# Uploads stored at once, platform-wide; more wait their turn (never the event loop).
UPLOAD_THREADS = 2


@dataclass(frozen=True)
class UploadRequest:
    """One Worker upload as read from the wire, for ``StoreUpload``."""

    account: Account
    name: str
    body: bytes
    content_type: str | None
    deploy: bool
    create: bool
    source: str
    strict_inherit: bool


StoreUpload = Callable[[ControlPlane, UploadRequest], UploadResult]


@dataclass(frozen=True)
class AssetUpload:
    """One static assets upload (``workers/assets/upload``) as read from the wire, for
    ``StoreAssets``: the form is still unparsed, even unjoined (the chunks as received)."""

    account_id: str
    token: str | None
    chunks: list[bytes]
    content_type: str | None


# A form's completion token once the session has every file, else None (``AssetStore.upload``).
StoreAssets = Callable[[ControlPlane, AssetUpload], str | None]


def store_assets(plane: ControlPlane, request: AssetUpload) -> str | None:
    """Join and parse the form (up to 64 MiB), decode and write its files (runs on an upload
    thread: on the loop, a 40 MiB bucket's form held every tenant for 200-400 ms)."""
    parts = parse_multipart(b"".join(request.chunks), request.content_type)
    files = {part.name: part.data for part in parts}
    return plane.assets.upload(request.account_id, request.token, files)


def store_upload(plane: ControlPlane, request: UploadRequest) -> UploadResult:
    """Parse, validate and store a version, then write its files out (runs on an upload thread).

    Writing the files here, not when the version is first started, keeps that disk work (the
    largest part for many small modules) off the event loop; it is idempotent, so starting the
    version later finds the directory in place. The caller removes it if the version is
    discarded (``discard``). Nothing is pruned here: the version may still be refused, and the
    versions it pushes out of the worker's window go only once it is accepted (``prune``).
    """
    upload = parse_worker_upload(parse_multipart(request.body, request.content_type))
    sent = upload.extra_metadata
    extra = plane.assets.attach(request.account.id, sent, upload.bindings)
    upload = dataclasses.replace(upload, extra_metadata=extra)
    stored = False
    try:
        result = plane.scripts.upload(
            request.account,
            request.name,
            upload,
            deploy=request.deploy,
            source=request.source,
            strict_inherit=request.strict_inherit,
            create=request.create,
        )
        stored = True
    finally:  # from now on the version, not the upload session, keeps its assets' files
        plane.assets.settle(request.account.id, sent, stored)
    try:
        plane.materialize(request.account.id, result.version)
    except BaseException:
        # No room for its files (or any other failure writing them out): the version goes
        # too, so that nothing was written, as the error says (removing rows needs no new
        # room); kept, it would fail each time it is deployed.
        with contextlib.suppress(StorageFull):
            if plane.scripts.discard_undeployed(request.account, request.name, result.version.id):
                plane.files.remove_version(request.account.id, result.version.id)
        raise
    return result


class Uploads:
    """See the module docstring."""

    def __init__(
        self,
        plane: ControlPlane,
        store: StoreUpload = store_upload,
        threads: int = UPLOAD_THREADS,
        store_assets: StoreAssets = store_assets,
    ) -> None:
        self._plane = plane
        self._store = store
        self._store_assets = store_assets
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ember-upload")
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._holders: dict[tuple[str, str], int] = {}

    @asynccontextmanager
    async def worker(self, account_id: str, name: str) -> AsyncIterator[None]:
        """Hold the (account, worker) upload lock; FIFO, so uploads keep their arrival order."""
        key = (account_id, name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._holders[key] = self._holders.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._holders[key] -= 1
            if not self._holders[key]:  # nobody holds or waits: forget it (bounded memory)
                del self._holders[key], self._locks[key]

    def queued(self, account_id: str, name: str) -> int:
        """Uploads of a worker holding or waiting for its lock."""
        return self._holders.get((account_id, name), 0)

    async def store(self, request: UploadRequest) -> UploadResult:
        """``store_upload`` (or the seam) on an upload thread."""
        return await self.run(self._store, self._plane, request)

    async def assets(self, request: AssetUpload) -> str | None:
        """``store_assets`` (or the seam) on an upload thread."""
        return await self.run(self._store_assets, self._plane, request)

    async def discard(self, account: Account, name: str, version_id: str) -> None:
        """Remove a version that was stored but refused (did not start, sandbox refused...),
        with its files, unless a deployment uses it."""
        if await self.run(self._plane.scripts.discard_undeployed, account, name, version_id):
            await self.remove_files(account.id, (version_id,))

    async def prune(self, account: Account, name: str) -> None:
        """Once an upload's version is accepted (started, or live and the route switched):
        delete the worker's versions past its window (``retention.py``), then their files."""
        pruned = await self.run(self._plane.scripts.prune, account, name)
        await self.remove_files(account.id, pruned)

    async def remove_files(self, account_id: str, version_ids: tuple[str, ...]) -> None:
        """Remove deleted versions' written-out files (up to 10,000 each: not on the loop),
        then the asset files no remaining version or pending upload session uses."""
        for version_id in version_ids:
            await self.run(self._plane.files.remove_version, account_id, version_id)
        if version_ids:
            await self.run(self._plane.sweep_assets, account_id)

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """``fn(*args, **kwargs)`` on an upload thread (file and database work of uploads)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        self._executor.shutdown(wait=True)
