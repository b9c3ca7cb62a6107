"""L6 (optional): a cgroup per worker for memory, pids and CPU quota (cgroup v1, as root).

In the cpu hierarchy a worker's group may nest in groups it shares with others (``nest``: the
platform gives its account's, and for a temporary account the group of all temporary accounts
around that): CFS then shares contended CPU between those groups by weight (``cpu.shares``, the
same for each), not between workers, so an account running ten spinning isolates gets no more
of the machine than one running a single isolate (each worker keeps its own quota inside). A
shared group is created by the first of its workers and removed with its last (a worker
starting as it is removed creates it again).

Groups are created by the monitor before the worker runs, under the monitor's own cgroup in each
hierarchy (the memory hierarchy here is host-managed: only children of our own group, never
moving anything out, pitfall 11), and removed by the monitor once the worker is gone. Should the
monitor itself be killed, its parent calls ``remove`` with the paths from the startup report, and
``remove_stale`` sweeps empty leftovers at start. cgroup v2 is reported, not used: this project's
machines expose no v2 controllers, so a v2 adapter could not be tested here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import signal
import time

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "ember-"
# Account groups: a prefix that ``group_name`` cannot produce (it starts with PREFIX), so the
# sweep of worker groups never takes one for a worker's.
ACCOUNT_PREFIX = "ember@"
CFS_PERIOD_US = 100_000


@dataclasses.dataclass(frozen=True)
class CgroupLimits:
    memory_bytes: int
    pids: int
    cpu_quota: float | None  # cores; None: no quota


def _v1_mounts() -> dict[str, str]:
    """controller -> mount point, for cgroup v1 hierarchies."""
    found: dict[str, str] = {}
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fstype, _source, options = (right.split() + ["", "", ""])[:3]
            if fstype != "cgroup":
                continue
            mount_point = left.split()[4]
            for option in options.split(","):
                found.setdefault(option, mount_point)
    return found


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path in that v1 hierarchy."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(","):
                if controller:
                    paths[controller] = path
    return paths


def parents() -> dict[str, str]:
    """controller -> directory under which our groups go; raises OSError naming what is missing."""
    mounts, own = _v1_mounts(), _own_paths()
    result = {}
    for controller in CONTROLLERS:
        if controller not in mounts:
            unified = os.path.exists(os.path.join(ROOT, "cgroup.controllers")) or os.path.exists(
                os.path.join(ROOT, "unified", "cgroup.controllers")
            )
            hint = " (cgroup v2 found; ember's cgroup layer supports v1 only)" if unified else ""
            raise OSError(errno.ENOENT, f"no cgroup v1 '{controller}' hierarchy{hint}")
        result[controller] = os.path.join(mounts[controller], own.get(controller, "/").lstrip("/"))
    return result


def group_name(deployment_id: str, pid: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", deployment_id)[:40]
    return f"{PREFIX}{safe}-{pid}"


def shared_group(name: str) -> str:
    """The directory of a cpu group workers share (``name``: an account id, or any name; made
    safe here)."""
    return ACCOUNT_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60]


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _mkdir_in(parent: str, groups: tuple[str, ...], name: str) -> str:
    """Create ``parent/groups.../name``; shared groups are made when missing. Another worker's
    ``remove`` may take an emptied shared group away between two mkdirs: then make it again."""
    for _attempt in range(8):
        base = parent
        try:
            for group in groups:
                base = os.path.join(base, group)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(base, 0o755)
            path = os.path.join(base, name)
            os.mkdir(path, 0o755)
            return path
        except FileNotFoundError:
            if not groups:
                raise
            continue  # a shared group went between two calls
    raise OSError(errno.EAGAIN, f"shared cgroup {base} kept disappearing")


def create(name: str, limits: CgroupLimits, nest: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Create one group per controller with its limits; nothing is left behind on failure.

    ``nest``: the shared cpu groups, outermost first, the worker's cpu group goes in (see the
    module's docstring); the other controllers' groups do not nest."""
    created: list[str] = []
    groups = tuple(shared_group(part) for part in nest)
    try:
        for controller, parent in parents().items():
            path = _mkdir_in(parent, groups if controller == "cpu" else (), name)
            created.append(path)
            if controller == "memory":
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limits.memory_bytes))
            elif controller == "pids":
                _write(os.path.join(path, "pids.max"), str(limits.pids))
            elif controller == "cpu" and limits.cpu_quota is not None:
                _write(os.path.join(path, "cpu.cfs_period_us"), str(CFS_PERIOD_US))
                quota = max(1000, int(limits.cpu_quota * CFS_PERIOD_US))
                _write(os.path.join(path, "cpu.cfs_quota_us"), str(quota))
    except OSError:
        remove(tuple(created))
        raise
    return tuple(created)


def attach(paths: tuple[str, ...], pid: int) -> None:
    for path in paths:
        _write(os.path.join(path, "cgroup.procs"), str(pid))


def _members(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs")) as handle:
            return [int(x) for x in handle.read().split()]
    except FileNotFoundError:
        return []


def remove(paths: tuple[str, ...], *, timeout_s: float = 2.0) -> list[str]:
    """SIGKILL whatever is still inside, then rmdir; returns the paths that could not be removed.

    An account group left empty by a removed worker group goes too."""
    deadline = time.monotonic() + timeout_s
    left: list[str] = []
    for path in paths:
        while os.path.isdir(path):
            for pid in _members(path):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(path)
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    left.append(path)
                    break
                time.sleep(0.005)
        if path not in left:
            outer = os.path.dirname(path)
            while _remove_if_empty_shared(outer):
                outer = os.path.dirname(outer)
    return left


def _remove_if_empty_shared(path: str) -> bool:
    """rmdir ``path`` if it is a shared group with no group left in it (the kernel refuses a
    group with children or members: EBUSY, left for its other workers)."""
    if not os.path.basename(path).startswith(ACCOUNT_PREFIX):
        return False
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def _monitor_alive(name: str) -> bool:
    """True while the monitor named in the group runs (a zombie, dead but not yet reaped by
    whoever inherited it, counts as gone: its cleanup will never happen)."""
    pid = name.rsplit("-", 1)[-1]
    if not pid.isdigit():
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def remove_stale() -> list[str]:
    """Remove empty groups whose monitor (the pid in the name) is gone: it was killed before it
    could clean up. Groups of live monitors, even empty ones still starting, are left alone."""
    removed: list[str] = []
    for parent in parents().values():
        removed += _remove_stale_in(parent)
    return removed


def _remove_stale_in(parent: str) -> list[str]:
    """``remove_stale`` in ``parent`` and the shared groups in it, those left empty too."""
    removed = []
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        if entry.startswith(ACCOUNT_PREFIX) and os.path.isdir(path):
            removed += _remove_stale_in(path)
            if _remove_if_empty_shared(path):
                removed.append(path)
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        if not entry.startswith(PREFIX) or _monitor_alive(entry):
            continue
        if os.path.isdir(path) and not _members(path):
            try:
                os.rmdir(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def probe() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "needs root (cgroup v1 delegation to other users is not supported)"
    try:
        paths = create(group_name("probe", os.getpid()), CgroupLimits(64 << 20, 8, 0.5))
    except OSError as exc:
        return False, f"cannot create a cgroup: {exc.strerror or exc}"
    left = remove(paths)
    if left:
        return False, f"created but could not remove {left[0]}"
    return True, "cgroup v1 (memory, pids, cpu) under our own groups"
