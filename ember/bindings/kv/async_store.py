"""``AsyncKVStore``: the KV store for an event loop, on threads of its own, with the day's
operations of each account counted against it (``daily.py``: bindings and the REST API share one
store, so they share one count) and the one-write-per-second limit of each key
(``key_rate.py``).

Reads and writes take different threads, so one tenant's write flood stalls nobody else's KV:

- Reads (``get``, ``list``) run on a reader thread with the store's read connection. WAL lets
  them run beside the writer's transaction; they see the last commit. A worker reads its own
  writes: ``put`` returns only after its commit, so a ``get`` after it sees it.
- Writes (and everything else: namespaces, housekeeping) run on one writer thread that keeps
  a queue per owner and shares its time among them by bytes (``fair_writer.py``): another
  account's write waits for the write in progress and at most one write of each busy account,
  not for a flooder's backlog, nor for the next of its 24 MB values. Key writes queued together
  are committed together, in that order, one flush for the group (``write_group.py``); each is
  still acknowledged only after the commit, with its own outcome. ``group_commit=False`` commits
  each on its own (the reference the grouped path is tested against).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from ember.bindings.daily import DailyUsage
from ember.bindings.kv.daily import KVDailyOps
from ember.bindings.kv.fair_writer import FairWriter, GroupCommit
from ember.bindings.kv.key_rate import KeyWriteRate
from ember.bindings.kv.records import (
    KVDelete,
    KVEntry,
    KVExpire,
    KVListPage,
    KVPoolSource,
    KVPut,
    KVQuota,
    KVWrite,
    KVWriteOp,
)
from ember.bindings.kv.store import KVStore

P = ParamSpec("P")
R = TypeVar("R")
CONTROL = ""  # the owner of control-plane and housekeeping writes (no account's own)
log = logging.getLogger("ember.kv")


class AsyncKVStore:
    """``KVStore`` for an event loop: reads on a reader thread, writes fairly on a writer."""

    def __init__(self, store: KVStore, group_commit: bool = True) -> None:
        self.store = store
        self.daily = KVDailyOps(DailyUsage(store.clock))
        self.key_writes = KeyWriteRate(store.clock)
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-kv-read")
        group = GroupCommit(store.apply_group) if group_commit else None
        self._writer = FairWriter("ember-kv-write", group)

    async def read(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(*args, **kwargs)`` (a read of the store's read connection) on the reader."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, lambda: fn(*args, **kwargs))

    async def write(self, owner: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(*args, **kwargs)`` on the writer thread in ``owner``'s turn; returns once it
        returned (a store write: after its commit)."""
        future: Future[R] = self._writer.submit(owner, lambda: fn(*args, **kwargs))
        return await asyncio.wrap_future(future)

    async def apply(self, owner: str, op: KVWriteOp) -> None:
        """Apply a key write in ``owner``'s turn, committed with the writes queued beside it;
        returns after that commit, or raises the error that refused this write alone."""
        future: Future[None] = self._writer.submit(
            owner, lambda: self.store.apply(op), item=op, size=op.size()
        )
        await asyncio.wrap_future(future)

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` on the writer thread as the platform's own work (namespaces, GC)."""
        return await self.write(CONTROL, fn, *args, **kwargs)

    # -- the keys' operations ---------------------------------------------------------------

    async def get(self, owner: str, namespace_id: str, key: str) -> KVEntry | None:
        """The live entry, read beside any write; an expired one is removed in ``owner``'s
        turn on the writer, not waited for (the read answers None either way)."""
        found = await self.read(self.store.lookup, namespace_id, key)
        if found.expired:
            expire = KVExpire(namespace_id, key)  # grouped with the writes queued beside it
            removal = self._writer.submit(
                owner,
                lambda: self.store.remove_expired(namespace_id, key),
                item=expire,
                size=expire.size(),
            )
            removal.add_done_callback(_log_failure)
        return found.entry

    async def list(
        self,
        namespace_id: str,
        *,
        prefix: str = "",
        limit: int = 1000,
        cursor: str | None = None,
    ) -> KVListPage:
        return await self.read(
            self.store.list, namespace_id, prefix=prefix, limit=limit, cursor=cursor
        )

    async def put(
        self,
        owner: str,
        namespace_id: str,
        key: str,
        value: bytes,
        *,
        expiration: int | None = None,
        metadata: str | None = None,
        quota: KVQuota | None = None,
        registered_only: bool = False,
    ) -> None:
        write = KVWrite(key, value, expiration, metadata)
        await self.apply(owner, KVPut(namespace_id, (write,), quota, None, registered_only))

    async def put_many(
        self,
        owner: str,
        namespace_id: str,
        writes: Sequence[KVWrite],
        *,
        quota: KVQuota | None = None,
        registered_only: bool = False,
        pool: KVPoolSource | None = None,
    ) -> None:
        op = KVPut(namespace_id, tuple(writes), quota, pool, registered_only)
        await self.apply(owner, op)

    async def delete_many(self, owner: str, namespace_id: str, keys: Sequence[str]) -> None:
        await self.apply(owner, KVDelete(namespace_id, tuple(keys)))

    async def aclose(self) -> None:
        """Finish queued operations, then close the database."""
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """``aclose`` for callers without an event loop."""
        self._writer.shutdown()
        self._reader.shutdown(wait=True)
        self.store.close()


def _log_failure(future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:  # housekeeping: the key stays invisible, and is removed later
        log.warning("removing an expired KV key failed: %s", exc)
