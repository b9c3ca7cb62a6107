"""Pool uids for sandboxed deployments (root only): one per deployment, recycled safely.

A uid per deployment makes ``RLIMIT_NPROC`` per tenant and is a DAC wall should a namespace be
missing (isolation.md §2.1, §6.2 L2). Handing a uid out must never give one tenant's leftovers
to another, so:

* a uid is **claimed across processes** with a byte-range lock (``lockf``) on one lock file, so
  two supervisors on one host never share a uid; the kernel drops the lock when the holder
  dies, however it dies;
* before a uid is handed out, and again when it is given back, whatever still runs as it is
  killed (``kill``: the zygote becomes that uid and sends ``kill(-1, SIGKILL)``), and the uid is
  used only if ``/proc`` then shows no process of it;
* uids with a passwd entry are never used.

POSIX record locks belong to the process, not the file descriptor, and vanish when the process
closes *any* descriptor of the file: the pool keeps its one descriptor open for its lifetime
and nothing else in ember opens the lock file.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pwd
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ConfigError, LimitExceeded

Killer = Callable[[int], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class UidRange:
    """Which uids the pool may use, and where their cross-process locks live."""

    first: int = 300_000
    count: int = 10_000
    lock_file: Path = Path("/run/ember/pool-uids.lock")

    def __post_init__(self) -> None:
        if self.first < 1000 or self.count < 1 or self.first + self.count > 2**31 - 2:
            raise ConfigError(
                "sandbox.uids", "first", self.first, "a range of uids at or above 1000"
            )


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose /proc entry belongs to ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # it exited while we looked
        if state not in (b"Z", b"X"):  # a zombie holds nothing; its reaper is on its way
            found.append(int(entry))
    return found


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


class UidPool:
    """Allocates pool uids to deployment ids; see the module docstring."""

    def __init__(self, uids: UidRange, kill: Killer) -> None:
        self.uids = uids
        self._kill = kill
        self._held: dict[str, int] = {}
        self._releasing: set[int] = set()  # being cleaned: not to be handed out meanwhile
        self._fd: int | None = None

    def uid_of(self, deployment_id: str) -> int | None:
        """The uid a deployment holds, if any."""
        return self._held.get(deployment_id)

    def held(self) -> dict[str, int]:
        """deployment id -> uid, for diagnostics and tests."""
        return dict(self._held)

    async def acquire(self, deployment_id: str) -> int:
        """The deployment's uid: the one it holds, or a free one, clean and locked."""
        uid = self._held.get(deployment_id)
        if uid is not None:
            return uid
        taken = set(self._held.values()) | self._releasing
        for candidate in range(self.uids.first, self.uids.first + self.uids.count):
            if candidate in taken or _has_passwd_entry(candidate) or not self._lock(candidate):
                continue
            self._releasing.add(candidate)  # reserved while we clean it
            try:
                clean = await self._clean(candidate)
            finally:
                self._releasing.discard(candidate)
            held = self._held.get(deployment_id)
            if clean and held is None:
                self._held[deployment_id] = candidate
                return candidate
            self._unlock(candidate)  # survived SIGKILL, or a concurrent call won: skip it
            if held is not None:
                return held
        last = self.uids.first + self.uids.count - 1
        raise LimitExceeded(
            "pool uids",
            len(self._held) + 1,
            self.uids.count,
            f"no free pool uid in {self.uids.first}..{last} ({len(self._held)} deployments "
            "hold one, others may be claimed by another supervisor); widen the uid range",
        )

    async def release(self, deployment_id: str) -> None:
        """Give a deployment's uid back once its isolates are gone: kill leftovers, unlock."""
        uid = self._held.pop(deployment_id, None)
        if uid is None:
            return
        self._releasing.add(uid)
        try:
            await self._clean(uid)
        finally:
            self._releasing.discard(uid)
            self._unlock(uid)  # a uid still not clean is killed again before its next use

    async def close(self) -> None:
        """Release every uid and the lock file."""
        for deployment_id in list(self._held):
            await self.release(deployment_id)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def _clean(self, uid: int) -> bool:
        if not processes_of(uid):
            return True
        await self._kill(uid)
        for _ in range(50):  # SIGKILL is asynchronous: give the kernel a moment (<= 0.5 s)
            if not processes_of(uid):
                return True
            await asyncio.sleep(0.01)
        return False

    def _lock_fd(self) -> int:
        if self._fd is None:
            path = self.uids.lock_file
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def _lock(self, uid: int) -> bool:
        try:
            fcntl.lockf(self._lock_fd(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, uid)
        except (BlockingIOError, PermissionError):
            return False  # another supervisor on this host holds it
        return True

    def _unlock(self, uid: int) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, uid)
