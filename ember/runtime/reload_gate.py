"""``ember dev``'s reloads, one at a time, and the requests that must wait for them.

Polling alone leaves a window (up to the poll interval, plus the reload itself) in which a
request sent right after a file was saved is answered by the previous version: an agent's
write-then-call loop reads stale results. ``wrangler dev`` holds requests while it reloads;
here each request first asks the watcher whether anything on disk moved (``stale``: stat calls
only), and if so, waits for the reload that brings the served version up to the files (or
joins the one under way). The poller keeps reloading on its own for crons and the terminal.

A check is a stat per watched file and directory: measured 26-30 µs for examples/hello (three
paths) on the 2-core test VM under load, a fair part of a request's ~40 µs in the supervisor.
The HTTP fast path asks from its protocol's ``data_received``, which runs while the event loop
handles the I/O of one poll: a clean answer is remembered until the loop's next iteration (a
``call_soon``, run before the next poll by asyncio and uvloop alike). Every request read in one
batch was in its socket when that poll returned, so a save before it was on disk by then, before
the batch's first check. Under load that is one check for many requests; a write-then-call
client gets one per call. Elsewhere (a task's step, which uvloop may run just before a poll)
every call checks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from ember.runtime.watcher import FileWatcher

log = logging.getLogger(__name__)


class ReloadGate:
    """Runs ``reload(changed)`` for the watcher's changes, never two at once."""

    def __init__(
        self, watcher: FileWatcher, reload: Callable[[list[Path]], Awaitable[None]]
    ) -> None:
        self.watcher = watcher
        self._reload = reload
        self._reloading: asyncio.Future[None] | None = None
        self._clean = False  # checked clean in this batch of I/O callbacks
        self._loop = asyncio.get_running_loop()

    def stale(self) -> bool:
        """Whether a request now would have to wait (a reload runs, or a file moved)."""
        return self._reloading is not None or self.watcher.stale()

    def stale_in_poll(self) -> bool:
        """``stale()``, for a callback run by the loop's I/O poll (a protocol's data_received):
        a clean answer holds for the rest of this poll's callbacks (the module docstring)."""
        if self._reloading is not None:
            return True
        if self._clean:
            return False
        if self.watcher.stale():
            return True
        self._clean = True
        self._loop.call_soon(self._forget)
        return False

    def _forget(self) -> None:
        self._clean = False

    def pending(self) -> Awaitable[None] | None:
        """None if the version served matches the files; else what to await before dispatch."""
        return self.settle() if self.stale() else None

    async def settle(self) -> None:
        """Reload until the version served matches the files on disk (as they were on entry)."""
        while True:
            if self._reloading is not None:
                # Shielded: a waiter whose client left must not cancel everybody's reload.
                await asyncio.shield(self._reloading)
                continue  # files saved during that reload may have been read before the save
            changed = self.watcher.changes()
            if not changed:
                return
            self._reloading = asyncio.ensure_future(self._run(changed))

    async def _run(self, changed: list[Path]) -> None:
        try:
            await self._reload(changed)
        finally:
            self._reloading = None

    async def poll(self, interval: float) -> None:
        """Reload on changes every ``interval`` seconds, until cancelled. A poll walks the
        project only when the watcher says something may have moved (``due``: stat calls): the
        walk runs on the event loop, and took 0.5 s a poll in a 50k-file tree."""
        while True:
            await asyncio.sleep(interval)
            if self._reloading is None and not self.watcher.due():
                continue
            try:
                await self.settle()
            except Exception:  # a reload that failed oddly: the next change reloads again
                log.exception("reloading after a change failed")
