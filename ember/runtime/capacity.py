"""The platform-wide cap on live isolates (isolation.md §6.1: "global worker cap -> evict the LRU
idle worker, else 503").

An idle isolate keeps its memory (a worker that allocated 95 MiB holds it until it stops), and
``--idle-timeout`` alone lets one account keep any number of them resident. Before a new isolate
starts, the supervisor asks ``make_room``: under the cap it may start; at the cap the least
recently used idle isolate is stopped for it; when every one is busy the request gets a 503.

    cap = IsolateCap(64)
    victim = cap.make_room(processes)   # None: room; else the isolate to stop
                                        # raises IsolatesExhausted when all are busy
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ember.errors import LimitExceeded
from ember.runtime.lifecycle import State

if TYPE_CHECKING:
    from ember.runtime.process import IsolateProcess

MIB = 1 << 20
BYTES_PER_ISOLATE = 256 * MIB  # the default cap: one isolate per 256 MiB of the machine's RAM
MIN_DEFAULT_ISOLATES = 4


class IsolatesExhausted(LimitExceeded):
    """Every live isolate is busy and the platform is at its cap."""

    def __init__(self, limit: int) -> None:
        message = f"all {limit} of the platform's isolates are busy (platform.max_isolates)"
        super().__init__("platform.max_isolates", limit, limit, message)


def default_max_isolates() -> int:
    """One isolate per 256 MiB of the memory ember may use, at least 4: idle isolates of
    ~100 MiB then hold under half of it (2 GiB: 8; 16 GiB: 64)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return MIN_DEFAULT_ISOLATES * 4
    return max(MIN_DEFAULT_ISOLATES, usable_memory(total) // BYTES_PER_ISOLATE)


def usable_memory(
    ram: int,
    root: Path = Path("/sys/fs/cgroup"),
    listing: Path = Path("/proc/self/cgroup"),
) -> int:
    """``ram``, or this process's cgroup memory limit where that is lower (a container started
    with ``--memory``): cgroup v2's ``memory.max`` or v1's ``memory.limit_in_bytes``."""
    try:
        lines = listing.read_text().splitlines()
    except OSError:
        return ram
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2: one unified hierarchy
            limits.append(root / path.lstrip("/") / "memory.max")
        elif "memory" in controllers.split(","):
            limits.append(root / "memory" / path.lstrip("/") / "memory.limit_in_bytes")
    for limit in limits:
        try:
            text = limit.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            ram = min(ram, int(text))
    return ram


def holds_memory(process: IsolateProcess) -> bool:
    """Starting or serving, or draining requests still in flight; a drained idle isolate is on
    its way out and does not count."""
    if process.state is State.DRAINING:
        return bool(process.inflight)
    return process.state in (State.STARTING, State.READY)


def is_idle(process: IsolateProcess) -> bool:
    return process.state is State.READY and not process.inflight


class IsolateCap:
    """See the module docstring; ``limit`` None means no cap (``ember dev``)."""

    def __init__(self, limit: int | None) -> None:
        assert limit is None or limit >= 1, "the config refuses max_isolates below 1"
        self.limit = limit

    def make_room(self, processes: Iterable[IsolateProcess]) -> IsolateProcess | None:
        """None when one more isolate fits; else the least recently used idle one to stop."""
        if self.limit is None:
            return None
        live = [p for p in processes if holds_memory(p)]
        if len(live) < self.limit:
            return None
        idle = [p for p in live if is_idle(p)]
        if not idle:
            raise IsolatesExhausted(self.limit)
        return min(idle, key=lambda p: p.last_active)

    def evicted(self) -> str:
        """The operator's log line for an isolate stopped to make room."""
        return f"isolate stopped: least recently used of {self.limit} (platform.max_isolates)"
