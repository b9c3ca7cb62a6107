"""L6 (optional): a cgroup per worker for memory, pids and CPU quota (cgroup v1, as root).

Groups are created by the monitor before the worker runs, under the monitor's own cgroup in each
hierarchy (the memory hierarchy here is host-managed: only children of our own group, never
moving anything out, pitfall 11), and removed by the monitor once the worker is gone. Should the
monitor itself be killed, its parent calls ``remove`` with the paths from the startup report, and
``remove_stale`` sweeps empty leftovers at start. cgroup v2 is reported, not used: this project's
machines expose no v2 controllers, so a v2 adapter could not be tested here.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import signal
import time

ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "ember-"
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


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def create(name: str, limits: CgroupLimits) -> tuple[str, ...]:
    """Create one group per controller with its limits; nothing is left behind on failure."""
    created: list[str] = []
    try:
        for controller, parent in parents().items():
            path = os.path.join(parent, name)
            os.mkdir(path, 0o755)
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
    """SIGKILL whatever is still inside, then rmdir; returns the paths that could not be removed."""
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
    return left


def _monitor_alive(name: str) -> bool:
    pid = name.rsplit("-", 1)[-1]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


def remove_stale() -> list[str]:
    """Remove empty groups whose monitor (the pid in the name) is gone: it was killed before it
    could clean up. Groups of live monitors, even empty ones still starting, are left alone."""
    removed = []
    for parent in parents().values():
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
