"""L1: namespaces (user when unprivileged; pid, net, ipc, uts; mount in the worker itself).

Python cannot ``clone()`` into a new pid namespace, so the caller ``unshare``s and then forks:
only that child is pid 1 of the new namespace (isolation.md §2.2). The mount namespace is
unshared by the worker after the fork, so the monitor keeps the host's view (it must reach
``/sys/fs/cgroup`` to clean up) and ``pivot_root`` moves only the worker.
"""

from __future__ import annotations

import os
import socket
from types import MappingProxyType

from ember.runtime.sandbox import _linux
from ember.runtime.sandbox.spec import Layer

_FLAGS = MappingProxyType(
    {
        Layer.PID_NS: _linux.CLONE_NEWPID,
        Layer.NET_NS: _linux.CLONE_NEWNET,
        Layer.IPC_UTS_NS: _linux.CLONE_NEWIPC | _linux.CLONE_NEWUTS,
    }
)


def outer_flags(layers: frozenset[Layer], user_namespace: bool) -> int:
    """Flags unshared by the caller before the fork (everything but the mount namespace)."""
    flags = 0
    for layer, flag in _FLAGS.items():
        if layer in layers:
            flags |= flag
    if user_namespace and (flags or Layer.MOUNT_NS in layers):
        flags |= _linux.CLONE_NEWUSER
    return flags


def write_id_maps(outer_uid: int, outer_gid: int) -> None:
    """Map uid/gid 0 inside to our own ids outside (the only mapping an unprivileged user may
    write); ``setgroups`` must be denied first."""
    # A process that changed uid earlier is not dumpable, and then its /proc files are owned by
    # root, so it could not write its own maps. The flag is cleared again later (hygiene).
    _linux.prctl(_linux.PR_SET_DUMPABLE, 1)
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"0 {outer_uid} 1"),
        ("gid_map", f"0 {outer_gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def enter_outer(layers: frozenset[Layer], user_namespace: bool) -> int:
    """Unshare the outer namespaces; returns the flags used (0: nothing to do)."""
    flags = outer_flags(layers, user_namespace)
    if not flags:
        return 0
    uid, gid = os.geteuid(), os.getegid()
    _linux.unshare(flags)
    if flags & _linux.CLONE_NEWUSER:
        write_id_maps(uid, gid)
    return flags


def enter_mount_namespace() -> None:
    _linux.unshare(_linux.CLONE_NEWNS)


def set_hostname(name: str) -> None:
    """Give the worker a neutral host name (the host's own name is information)."""
    socket.sethostname(name)
