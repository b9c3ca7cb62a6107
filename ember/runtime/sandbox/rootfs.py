"""L1 (mount namespace): the worker's private root.

A size-capped tmpfs becomes ``/``; it holds only read-only binds of the Python runtime (prefixes
and site-packages), ember's package, the deployment's code (at ``/app``) and a few system files,
plus a size-capped tmpfs at ``/tmp``, ``/dev/{null,zero,random,urandom}`` and, with a pid
namespace, a new ``/proc`` showing only the worker's own processes. Host paths are mirrored at
the same place, so ``sys.path`` and already-imported modules stay valid; directories created on
the way are 0755, so a pool uid can traverse to a Python installed under a 0700 home.

The plan is computed from the spec before any mount changes (pure, unit-tested); ``build_root``
applies it in the worker, which must already be in its own mount namespace.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import sysconfig
from pathlib import Path

import ember
from ember.runtime.sandbox import _linux
from ember.runtime.sandbox.errors import SandboxError
from ember.runtime.sandbox.spec import SandboxSpec

CODE_DIR = "/app"
TEMP_DIR = "/tmp"
RESERVED = ("/app", "/dev", "/proc")
DEVICES = ("null", "zero", "random", "urandom")
SYSTEM_DIRS = ("/usr",)
SYSTEM_LIB_DIRS = ("/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")
_BASE = "/tmp"  # where the scaffolding tmpfs goes while the root is assembled (host /tmp is
# still reachable at /oldroot/tmp once the first pivot_root has moved the host root there)


@dataclasses.dataclass(frozen=True)
class Bind:
    source: str  # real host path
    target: str  # path inside the new root
    is_dir: bool
    noexec: bool = False


@dataclasses.dataclass(frozen=True)
class MountPlan:
    binds: tuple[Bind, ...]
    symlinks: tuple[tuple[str, str], ...]  # (path inside, link target)
    temp_size: int
    temp_owner: tuple[int, int]  # uid, gid owning /tmp inside
    with_proc: bool

    def read_paths(self) -> tuple[str, ...]:
        """Paths inside the root the worker reads from (for Landlock)."""
        return tuple(b.target for b in self.binds)


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@functools.cache
def shared_read_paths() -> tuple[str, ...]:
    """Host paths every worker may read, under a private root or Landlock alike: the system's
    and the runtime's (a state directory beneath one of them is walled by neither)."""
    return (*SYSTEM_DIRS, *SYSTEM_LIB_DIRS, *runtime_paths())


def runtime_paths() -> tuple[str, ...]:
    """The Python installation, its site-packages and ember's own package directory.

    Cached: it cannot change within a process, and sysconfig costs ~2 ms (``preload`` warms it
    in the zygote)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    scheme = sysconfig.get_paths()
    paths += [scheme.get("stdlib", ""), scheme.get("platstdlib", "")]
    paths += [p for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")]
    paths.append(str(Path(ember.__file__).resolve().parent))
    return tuple(os.path.abspath(p) for p in paths if p and os.path.isdir(p))


def _mirror(candidates: list[str]) -> tuple[list[Bind], list[tuple[str, str]]]:
    """Binds at each candidate's real path (outermost only) and symlinks for aliases."""
    binds: list[Bind] = []
    links: list[tuple[str, str]] = []
    for real in sorted({os.path.realpath(c) for c in candidates}, key=lambda p: (len(p), p)):
        if any(_under(real, b.target) for b in binds):
            continue
        for reserved in RESERVED:
            if _under(real, reserved) or _under(reserved, real):
                raise SandboxError("rootfs", f"{real} overlaps the reserved path {reserved}")
        binds.append(Bind(real, real, os.path.isdir(real)))
    # Shortest first: a path beneath an aliased directory (a venv's site-packages under a
    # symlinked venv) is reached through that alias, and creating its own link would need to
    # traverse the alias before the new root exists.
    for nominal in sorted(set(candidates), key=lambda p: (len(p), p)):
        real = os.path.realpath(nominal)
        if nominal == real or any(_under(nominal, b.target) for b in binds):
            continue
        if not any(_under(nominal, path) for path, _ in links):
            links.append((nominal, real))
    return binds, links


def build_plan(spec: SandboxSpec, *, temp_owner: tuple[int, int], with_proc: bool) -> MountPlan:
    candidates = [p for p in SYSTEM_DIRS if os.path.isdir(p)]
    candidates += list(runtime_paths())
    candidates += [os.path.abspath(p) for p in spec.extra_ro_paths]
    missing = [str(p) for p in spec.extra_ro_paths if not os.path.exists(p)]
    if missing:
        raise SandboxError("rootfs", f"extra read-only path {missing[0]} does not exist")
    links: list[tuple[str, str]] = []
    for lib in SYSTEM_LIB_DIRS:
        if os.path.islink(lib):
            links.append((lib, os.readlink(lib)))
        elif os.path.isdir(lib):
            candidates.append(lib)
    binds, aliases = _mirror(candidates)
    for path in SYSTEM_FILES:
        if os.path.exists(path):
            binds.append(Bind(os.path.realpath(path), path, False))
    code = os.path.realpath(spec.code_dir)
    if not os.path.isdir(code):
        raise SandboxError("rootfs", f"code dir {spec.code_dir} is not a directory")
    binds.append(Bind(code, CODE_DIR, True, noexec=True))
    link_paths = {path for path, _ in links}
    links += [(path, target) for path, target in aliases if path not in link_paths]
    return MountPlan(tuple(binds), tuple(links), spec.temp_size, temp_owner, with_proc)


def _makedirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def _mountpoint(path: str, is_dir: bool) -> None:
    if is_dir:
        _makedirs(path)
    else:
        _makedirs(os.path.dirname(path))
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def _read_only(path: str, noexec: bool) -> None:
    """Make a bind (and every mount beneath it) read-only, keeping flags the kernel locked."""
    attrs = _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
    if noexec:
        attrs |= _linux.MOUNT_ATTR_NOEXEC
    try:
        _linux.mount_setattr_recursive(path, attrs)
        return
    except OSError:
        pass  # before Linux 5.12: remount the top mount, preserving locked flags
    flags = _linux.MS_REMOUNT | _linux.MS_BIND | _linux.MS_RDONLY
    flags |= _linux.MS_NOSUID | _linux.MS_NODEV
    if noexec or os.statvfs(path).f_flag & os.ST_NOEXEC:
        flags |= _linux.MS_NOEXEC
    _linux.mount(None, path, None, flags)


def _mount_proc(target: str) -> None:
    flags = _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC
    try:  # subset=pid (5.8+): only pid directories, no /proc/sys, /proc/kcore, ...
        _linux.mount("proc", target, "proc", flags, "subset=pid")
    except OSError:
        _linux.mount("proc", target, "proc", flags)


def _populate(plan: MountPlan, new: str) -> None:
    uid, gid = plan.temp_owner
    _makedirs(new + TEMP_DIR)  # the temp tmpfs first: mounted later, it would hide binds
    options = f"size={plan.temp_size},mode=0700,uid={uid},gid={gid}"
    nodev_nosuid = _linux.MS_NOSUID | _linux.MS_NODEV
    _linux.mount("tmpfs", new + TEMP_DIR, "tmpfs", nodev_nosuid | _linux.MS_NOEXEC, options)
    for bind in plan.binds:
        _mountpoint(new + bind.target, bind.is_dir)
        _linux.mount(
            "/oldroot" + bind.source, new + bind.target, None, _linux.MS_BIND | _linux.MS_REC
        )
        _read_only(new + bind.target, bind.noexec)
    for path, target in plan.symlinks:
        if not os.path.lexists(new + path):
            _makedirs(os.path.dirname(new + path))
            os.symlink(target, new + path)
    _makedirs(new + "/dev")
    for name in DEVICES:
        device = "/dev/" + name
        if os.path.exists("/oldroot" + device):
            _mountpoint(new + device, False)
            _linux.mount("/oldroot" + device, new + device, None, _linux.MS_BIND)
    if plan.with_proc:
        _makedirs(new + "/proc")
        _mount_proc(new + "/proc")
        for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0")):
            os.symlink(target, f"{new}/dev/{name}")
        os.symlink("/proc/self/fd/1", new + "/dev/stdout")
        os.symlink("/proc/self/fd/2", new + "/dev/stderr")


def build_root(plan: MountPlan) -> tuple[str, ...]:
    """Assemble the new root and ``pivot_root`` into it; returns the names in ``/``.

    Sequence (bubblewrap's): a scaffolding tmpfs on /tmp becomes the root for a moment, with the
    host root at /oldroot as the bind source and the new root tmpfs at /newroot; then the new
    root replaces it and the scaffolding and host root are detached together.
    """
    old_umask = os.umask(0o022)
    try:
        _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
        nodev_nosuid = _linux.MS_NOSUID | _linux.MS_NODEV
        _linux.mount("tmpfs", _BASE, "tmpfs", nodev_nosuid, "size=1m,mode=0755")
        os.chdir(_BASE)
        os.mkdir("newroot", 0o755)
        os.mkdir("oldroot", 0o755)
        _linux.mount("tmpfs", "newroot", "tmpfs", nodev_nosuid, "size=1m,mode=0755")
        _linux.pivot_root(".", "oldroot")
        os.chdir("/")
        _populate(plan, "/newroot")
        os.chdir("/newroot")
        _linux.pivot_root(".", ".")
        # The scaffolding is now stacked on "/"; detaching it takes the host root beneath it
        # along in the same call (each detach waits for an RCU grace period: one, not two).
        _linux.umount2(".", _linux.MNT_DETACH)
        os.chdir("/")
        _linux.mount(
            None, "/", None, _linux.MS_REMOUNT | _linux.MS_BIND | _linux.MS_RDONLY | nodev_nosuid
        )
        return tuple(sorted(os.listdir("/")))
    finally:
        os.umask(old_umask)
