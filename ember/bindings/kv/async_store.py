"""``AsyncKVStore``: the KV store for an event loop, on one worker thread of its own, with the
day's operations of each account counted against it (``daily.py``: bindings and the REST API
share one store, so they share one count)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from ember.bindings.daily import DailyUsage
from ember.bindings.kv.daily import KVDailyOps
from ember.bindings.kv.store import KVStore

P = ParamSpec("P")
R = TypeVar("R")


class AsyncKVStore:
    """``KVStore`` for an event loop: each operation runs on the store's own thread."""

    def __init__(self, store: KVStore) -> None:
        self.store = store
        self.daily = KVDailyOps(DailyUsage(store.clock))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-kv")

    async def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(*args, **kwargs)`` on the store thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    async def aclose(self) -> None:
        """Finish queued operations, then close the database."""
        await self.run(self.store.close)
        self._executor.shutdown(wait=True)

    def close(self) -> None:
        """``aclose`` for callers without an event loop."""
        self._executor.shutdown(wait=True)
        self.store.close()
