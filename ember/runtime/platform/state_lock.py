"""One ``ember serve`` per state directory.

Two platforms on one state directory would each think they own it: both serve the same
accounts from one SQLite file (fine for SQLite, not for what is built on it: each keeps its
routes, isolates and quotas in memory, so a deploy through one never reaches the other's
router), and the second's start-up removes version folders that have no row yet (the files of
an upload the first is still committing: ``GarbageCollector.remove_orphan_files``). So
``ember serve`` takes an exclusive ``flock`` on ``<state>/serve.lock`` before it touches
anything and holds it until the process ends; the kernel drops it however the process dies,
so a crash never leaves a stale lock. The file holds the holder's pid, for the refusal, and
once it listens the URL it serves on (``record_origin``), which ``ember accounts create`` reads
to print a login line that reaches it (``served_origin``).
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

    def record_origin(self, origin: str) -> None:
        """Write the URL this platform serves on after the pid (it stays after the process ends:
        the URL the platform last served on)."""
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n{origin}\n".encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = -1


def exposure_warning(state_dir: Path) -> str | None:
    """A line for the operator when ``state_dir`` is open to its group or to other users (made
    by hand, or by an ember before it was created 0700); None when it is private."""
    mode = state_dir.stat().st_mode & 0o777
    if not mode & 0o077:
        return None
    return (
        f"[ember] warning: the state directory {state_dir} is readable by other users (mode "
        f"{mode:o}); it holds every account's secrets and data: chmod 700 {state_dir}"
    )


def lock_state_dir(state_dir: Path) -> StateDirLock:
    """Take ``state_dir``'s serve lock or raise ``StateDirInUse`` naming the holder."""
    # The first to create it (before the databases): private, as it holds every account's
    # secrets, tokens' hashes, code and KV data.
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").split("\n", 1)[0].strip()
        os.close(fd)
        who = f"pid {holder}" if holder.isdigit() else "another process"
        raise StateDirInUse(
            f"the state directory {state_dir} is in use by another ember serve ({who}); "
            "stop that one first, or give this one its own --state-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return StateDirLock(path, fd)


@dataclass(frozen=True)
class ServedOrigin:
    """The URL an ``ember serve`` of a state directory serves (``running``) or last served on."""

    url: str
    running: bool


def served_origin(state_dir: Path) -> ServedOrigin | None:
    """What ``record_origin`` wrote in ``state_dir``'s lock, or None (no serve listened yet).
    Whether it still runs is read from its pid, not by taking the lock: a probe holding the
    lock even briefly could make a serve starting at that moment refuse to start."""
    try:
        lines = (state_dir / LOCK_NAME).read_text("utf-8", "replace").splitlines()
    except OSError:
        return None
    url = lines[1].strip() if len(lines) > 1 else ""
    if not url.startswith(("http://", "https://")):
        return None
    return ServedOrigin(url, lines[0].strip().isdigit() and _alive(int(lines[0])))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
