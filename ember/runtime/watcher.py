"""Polling file watcher for ``ember dev``: the project's files and its config, by mtime and size.

Polling (every ``interval`` seconds) needs no extra dependency and behaves the same on every
filesystem; for a project of a few hundred files it costs well under a millisecond per poll.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from ember.runtime.deployment import project_files

Snapshot = dict[Path, tuple[int, int]]


class FileWatcher:
    """Calls ``on_change(changed_paths)`` when files under ``root`` (or ``extra``) change."""

    def __init__(
        self,
        root: Path,
        on_change: Callable[[list[Path]], Awaitable[None]],
        *,
        extra: Iterable[Path] = (),
        interval: float = 0.25,
    ) -> None:
        self.root = root
        self.on_change = on_change
        self.extra = tuple(extra)
        self.interval = interval
        self._snapshot = self.snapshot()

    def snapshot(self) -> Snapshot:
        """mtime and size of every watched file."""
        state: Snapshot = {}
        for path in [*project_files(self.root), *self.extra]:
            try:
                stat = os.stat(path)
            except OSError:
                continue
            state[path] = (stat.st_mtime_ns, stat.st_size)
        return state

    def changes(self) -> list[Path]:
        """Paths added, removed or modified since the last call."""
        current = self.snapshot()
        changed = [
            p
            for p in current.keys() | self._snapshot.keys()
            if current.get(p) != self._snapshot.get(p)
        ]
        self._snapshot = current
        return sorted(changed)

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            changed = self.changes()
            if changed:
                await self.on_change(changed)
