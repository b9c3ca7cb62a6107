"""ctypes bindings for the Linux calls the sandbox needs and Python 3.11 lacks.

Only thin wrappers live here: each raises ``OSError`` with the real errno and names the call, so
callers can say which step failed and why. Syscall numbers that differ per architecture are looked
up from ``platform.machine()``; calls added after 5.x (``mount_setattr``, Landlock) share one
number on every architecture ember supports.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from types import MappingProxyType

# unshare/clone flags (linux/sched.h)
CLONE_THREAD = 0x00010000
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# mount flags (linux/mount.h)
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

# prctl options (linux/prctl.h)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

M_ARENA_MAX = -8  # mallopt (malloc.h)

# mount_setattr (linux/mount.h)
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8

_PIVOT_ROOT = MappingProxyType(
    {
        "x86_64": 155,
        "aarch64": 41,
        "arm64": 41,
        "riscv64": 41,
        "loongarch64": 41,
        "i386": 217,
        "i686": 217,
        "armv7l": 218,
        "ppc64le": 203,
        "ppc64": 203,
        "s390x": 217,
    }
)
SYS_MOUNT_SETATTR = 442
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446


@functools.cache
def libc() -> ctypes.CDLL:
    # CDLL(None) is the running program's namespace, which already holds libc: no
    # find_library() call, which would spawn `ldconfig -p`.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4  # unused ones must be 0
    libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _b(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def syscall(number: int, *args: object, what: str) -> int:
    """Raw syscall through libc's ``syscall(2)``; negative results raise OSError."""
    return _check(libc().syscall(ctypes.c_long(number), *args), what)


def unshare(flags: int) -> None:
    if hasattr(os, "unshare"):  # Python 3.12+
        os.unshare(flags)
        return
    _check(libc().unshare(flags), f"unshare({flags:#x})")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    result = libc().mount(_b(source), _b(target), _b(fstype), flags, _b(data))
    _check(result, f"mount({source!r} -> {target!r}, type={fstype!r}, flags={flags:#x})")


def umount2(target: str, flags: int) -> None:
    _check(libc().umount2(_b(target), flags), f"umount2({target!r})")


def pivot_root(new_root: str, put_old: str) -> None:
    machine = platform.machine()
    number = _PIVOT_ROOT.get(machine)
    if number is None:
        raise OSError(38, f"pivot_root: no syscall number known for architecture {machine!r}")
    syscall(number, _b(new_root), _b(put_old), what=f"pivot_root({new_root!r}, {put_old!r})")


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def mount_setattr_recursive(path: str, attr_set: int) -> None:
    """Set mount attributes on ``path`` and every mount beneath it (Linux 5.12+)."""
    attr = _MountAttr(attr_set, 0, 0, 0)
    syscall(
        SYS_MOUNT_SETATTR,
        ctypes.c_int(AT_FDCWD),
        _b(path),
        ctypes.c_uint(AT_RECURSIVE),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
        what=f"mount_setattr({path!r})",
    )


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _check(libc().prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


def mallopt(param: int, value: int) -> bool:
    return bool(libc().mallopt(param, value))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable capability sets of this thread."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc().capset(ctypes.byref(header), data), "capset(empty)")


def cap_last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except OSError:
        return 40  # CAP_CHECKPOINT_RESTORE, the last one as of Linux 6.x
