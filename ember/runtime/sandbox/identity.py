"""L2: who the worker is. A pool uid per deployment when root; no capabilities in any case.

A uid per deployment makes ``RLIMIT_NPROC`` count only that deployment's processes (root is
exempt from it, and a shared uid let one tenant's fork bomb starve another's threads, §4), and
gives a DAC wall if a namespace is missing. Without the UID layer (unprivileged, or root by
choice) the worker is uid 0 of its user namespace or of the host: its capabilities are dropped
explicitly so it cannot mount, unshare or change ids even where seccomp is off.
"""

from __future__ import annotations

import os

from ember.runtime.sandbox import _linux


def drop_bounding_set() -> None:
    """Empty the ambient and bounding capability sets (needs CAP_SETPCAP, so do it first)."""
    try:
        _linux.prctl(_linux.PR_CAP_AMBIENT, _linux.PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # kernels before 4.3 have no ambient set
    for cap in range(_linux.cap_last_cap() + 1):
        try:
            _linux.prctl(_linux.PR_CAPBSET_DROP, cap)
        except OSError:
            break  # no CAP_SETPCAP here, or past the last capability this kernel knows


def switch_to_pool_uid(uid: int, gid: int) -> None:
    """setgroups([]), then gid, then uid: the kernel clears every capability on the last step."""
    drop_bounding_set()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def drop_capabilities() -> None:
    """Keep the uid (0 in a user namespace, or root by choice) but hold no capability."""
    drop_bounding_set()
    _linux.clear_capabilities()
