"""The platform-wide cap on live isolates (isolation.md §6.1: "global worker cap -> evict the LRU
idle worker, else 503"), and each account's share of it.

An idle isolate keeps its memory (a worker that allocated 95 MiB holds it until it stops), and
``--idle-timeout`` alone lets one account keep any number of them resident. Before a new isolate
starts, the supervisor asks ``make_room``: under the cap it may start; at the cap the least
recently used idle isolate is stopped for it; when every one is busy the request gets a 503.

A busy isolate cannot be stopped for another, so the cap alone let one tenant holding requests
open (an ``await``, no CPU) take every isolate. ``ember serve`` therefore puts each isolate in
pools (``IsolatePool``: its account's, and for temporary accounts theirs together), each held
to a share of the cap; a pool at its share makes room from its own least recently used idle
isolate, or is refused (503, 1102) while other pools keep starting theirs. Idle isolates count:
one can turn busy without ever asking for room.

    cap = IsolateCap(64)
    room = cap.make_room({process: pools, ...}, new_pools)
        # None: room; else room.victim is the isolate to stop (room.reason: the log line);
        # raises IsolateShareExhausted (a pool of the new one is full of busy isolates) or
        # IsolatesExhausted (all are busy)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ember.errors import LimitExceeded
from ember.runtime.lifecycle import State
from ember.runtime.limits import PlatformError

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


# Cloudflare's page for a worker past its resources (workers-api.md §5.1, isolation.md: 1102,
# "Worker exceeded resource limits"); its 1015/1027 are request rates, not concurrency.
SHARE_CODE = 1102
# Rounds a share times the cap down without losing a whole isolate to float error
# (0.29 * 100 is 28.999999999999996).
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class IsolatePool:
    """Isolates that together may hold at most ``share`` of the cap: one account's, or all
    temporary accounts'. Pools are the same pool when their ``name`` is."""

    name: str  # "account:<id>", "temporary"
    share: float  # above 0, at most 1
    key: str  # the setting, named in refusals and log lines
    owner: str  # whose isolates, for messages: "this account's", "temporary accounts'"
    remedy: str = ""  # how the refused get past it, the end of the client's message

    def size(self, cap: int) -> int:
        """How many isolates it may hold under ``cap``."""
        return share_of(self.share, cap)


def share_of(share: float, cap: int) -> int:
    """``share`` of ``cap`` isolates: rounded down, at least one."""
    return max(1, math.floor(share * cap + _EPSILON))


class IsolateShareExhausted(LimitExceeded):
    """A pool of the new isolate holds its share of the cap, every isolate in it busy."""

    def __init__(self, pool: IsolatePool, busy: int, cap: int) -> None:
        self.pool = pool
        noun = "isolate" if busy == 1 else "isolates"
        self.refusal = f"{pool.owner} workers hold {busy} busy {noun}, the most they may"
        message = f"{self.refusal} ({pool.key}: {pool.share:g} of platform.max_isolates {cap})"
        super().__init__(pool.key, busy, pool.size(cap), message)

    def error(self) -> PlatformError:
        """The client's answer: what is full, the setting, and the way past it."""
        remedy = f"; to run more at once, {self.pool.remedy}" if self.pool.remedy else ""
        message = f"Worker could not start: {self.refusal} ({self.pool.key}){remedy}."
        return PlatformError(503, SHARE_CODE, message, "isolate_share")


@dataclass(frozen=True, slots=True)
class Room:
    """Room made for a new isolate by stopping ``victim``; ``reason`` is the operator's line."""

    victim: IsolateProcess
    reason: str


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

    def make_room(
        self,
        processes: Mapping[IsolateProcess, tuple[IsolatePool, ...]],
        pools: tuple[IsolatePool, ...] = (),
    ) -> Room | None:
        """None when one more isolate in ``pools`` fits; else the least recently used idle one
        to stop: of the first of ``pools`` at its share, or of all at the cap."""
        if self.limit is None:
            return None
        live = [(p, in_pools) for p, in_pools in processes.items() if holds_memory(p)]
        for pool in pools:
            members = [p for p, in_pools in live if any(q.name == pool.name for q in in_pools)]
            size = pool.size(self.limit)
            if len(members) >= size:
                victim = least_recently_used(members)
                if victim is None:
                    raise IsolateShareExhausted(pool, len(members), self.limit)
                reason = f"least recently used of {pool.owner} {size} ({pool.key})"
                return Room(victim, f"isolate stopped: {reason}")
        if len(live) < self.limit:
            return None
        victim = least_recently_used([p for p, _ in live])
        if victim is None:
            raise IsolatesExhausted(self.limit)
        return Room(victim, self.evicted())

    def evicted(self) -> str:
        """The operator's log line for an isolate stopped to make room under the cap."""
        return f"isolate stopped: least recently used of {self.limit} (platform.max_isolates)"


def least_recently_used(processes: Iterable[IsolateProcess]) -> IsolateProcess | None:
    """The idle one of ``processes`` whose last request is the oldest; None if all are busy."""
    return min((p for p in processes if is_idle(p)), key=lambda p: p.last_active, default=None)
