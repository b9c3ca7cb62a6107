"""One ``ember serve`` per state directory.

Two platforms on one state directory would each think they own it: both serve the same
accounts from one SQLite file (fine for SQLite, not for what is built on it: each keeps its
routes, isolates and quotas in memory, so a deploy through one never reaches the other's
router), and the second's start-up removes version folders that have no row yet (the files of
an upload the first is still committing: ``GarbageCollector.remove_orphan_files``). So
``ember serve`` takes an exclusive ``flock`` on ``<state>/serve.lock`` before it touches
anything and holds it until the process ends; the kernel drops it however the process dies,
so a crash never leaves a stale lock. The file holds the holder's pid, for the refusal.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from ember.errors import UserError

LOCK_NAME = "serve.lock"


class StateDirInUse(UserError):
    """Another ``ember serve`` holds the state directory."""


@dataclass
class StateDirLock:
    """The held lock (its open file descriptor); ``release`` gives it up early (tests)."""

    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = -1


def lock_state_dir(state_dir: Path) -> StateDirLock:
    """Take ``state_dir``'s serve lock or raise ``StateDirInUse`` naming the holder."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        who = f"pid {holder}" if holder.isdigit() else "another process"
        raise StateDirInUse(
            f"the state directory {state_dir} is in use by another ember serve ({who}); "
            "stop that one first, or give this one its own --state-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return StateDirLock(path, fd)
