"""Where ``ember dev`` stages a session's modules, and the removal of stages whose session died.

A session removes its stage when it ends. One killed by SIGKILL, the OOM killer or a closed
terminal cannot, and its copy of the project's modules would stay in the temp directory for
good. So each stage records its owner (pid, and the process's start time where the system
gives it, so that a recycled pid does not pass for the owner) and every new session removes the
stages whose owner is gone, as ``wrangler dev`` starts from a clean ``.wrangler/tmp``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

PREFIX = "ember-dev-"
OWNER_FILE = "owner"
CODE_DIR = "code"


@dataclass(frozen=True, slots=True)
class Owner:
    pid: int
    started: str  # the process's start time in clock ticks since boot ("" where unknown)

    def render(self) -> str:
        return f"{self.pid} {self.started}\n"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        parts = text.split()
        if not parts or not parts[0].isdigit():
            return None
        return cls(int(parts[0]), parts[1] if len(parts) > 1 else "")


def process_start(pid: int) -> str:
    """``pid``'s start time from /proc (field 22 of its stat line), or "" where unreadable."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = line.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def is_alive(owner: Owner) -> bool:
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process holds the pid: not provably ours, keep the stage
    return not owner.started or process_start(owner.pid) in ("", owner.started)


@dataclass(frozen=True, slots=True)
class DevStage:
    """One session's stage: ``root`` holds the owner record, ``code`` the staged modules."""

    root: Path

    @property
    def code(self) -> Path:
        return self.root / CODE_DIR

    @classmethod
    def create(cls, temp_dir: Path | None = None) -> DevStage:
        root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=temp_dir))
        pid = os.getpid()
        (root / OWNER_FILE).write_text(Owner(pid, process_start(pid)).render())
        (root / CODE_DIR).mkdir()
        return cls(root)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def remove_orphaned_stages(temp_dir: Path | None = None) -> list[Path]:
    """Remove the stages in ``temp_dir`` (default: the system's) whose owning session is gone.

    Only directories this user owns, that are not symlinks and that carry an owner record are
    touched: a stage from an older ember (no record) or another user's is left alone."""
    base = temp_dir or Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(base.glob(PREFIX + "*"))
    except OSError:
        return removed
    for path in entries:
        try:
            info = path.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            owner = Owner.parse((path / OWNER_FILE).read_text())
        except OSError:
            continue
        if owner is None or is_alive(owner):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
