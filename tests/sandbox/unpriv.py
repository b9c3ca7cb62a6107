"""Become an unprivileged user in a forked child, the way a non-root platform would run.

On this project's machines Python lives under root's home directory (mode 0700), which a
non-root uid cannot traverse; a non-root installation would have it somewhere readable. So,
still as root and in a
private mount namespace of this child only, each 0700 ancestor of the paths the worker needs is
covered with a 0755 tmpfs into which those paths are bound back. Then the child drops to the
uid for good: everything ``enter`` does afterwards is the unprivileged path (user namespace).
"""

from __future__ import annotations

import os
from pathlib import Path

from ember.runtime.sandbox import _linux, rootfs


def _blocking_ancestor(path: str) -> str | None:
    """The outermost ancestor of ``path`` that others may not traverse."""
    current = "/"
    for part in Path(path).parts[1:]:
        current = os.path.join(current, part)
        if os.path.isdir(current) and not os.stat(current).st_mode & 0o001:
            return current
    return None


def expose(paths: list[str]) -> None:
    _linux.unshare(_linux.CLONE_NEWNS)
    _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE)
    groups: dict[str, list[str]] = {}
    outermost: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == o or path.startswith(o + "/") for o in outermost):
            outermost.append(path)
    for path in outermost:
        blocker = _blocking_ancestor(path)
        if blocker is not None and blocker != path:
            groups.setdefault(blocker, []).append(path)
    for blocker, inside in groups.items():
        fds = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in inside}
        _linux.mount("tmpfs", blocker, "tmpfs", 0, "mode=0755,size=64k")
        for path, fd in fds.items():
            os.makedirs(path, mode=0o755, exist_ok=True)
            _linux.mount(f"/proc/self/fd/{fd}", path, None, _linux.MS_BIND | _linux.MS_REC)
            os.close(fd)


def become(uid: int, extra: list[Path]) -> None:
    old = os.umask(0o022)
    try:
        paths = [*rootfs.runtime_paths(), *(str(p) for p in extra)]
        expose([os.path.realpath(p) for p in paths])
    finally:
        os.umask(old)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
