"""``probe()``: which layers this host offers, and why not, found in throwaway forked children.

Each risky step runs in a child that is thrown away, so probing never changes the caller: the
namespace probe builds a real private root exactly as ``enter`` does (same code), the Landlock
and seccomp probe restricts a child, the cgroup probe creates and removes a real group.
"""

from __future__ import annotations

import json
import os
import platform
import select
import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from ember.runtime.sandbox import _linux, cgroup, landlock, namespaces, rootfs, seccomp
from ember.runtime.sandbox.spec import ALWAYS_AVAILABLE, Layer, LayerReport, LayerStatus, MiB

_NS_FLAGS = MappingProxyType(
    {
        Layer.PID_NS: _linux.CLONE_NEWPID,
        Layer.NET_NS: _linux.CLONE_NEWNET,
        Layer.IPC_UTS_NS: _linux.CLONE_NEWIPC | _linux.CLONE_NEWUTS,
    }
)


def _in_child(body: Callable[[], dict[str, Any]], timeout_s: float) -> dict[str, Any]:
    """Run ``body`` in a forked child; its dict comes back as JSON (or an error entry)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            result = body()
        except BaseException as exc:  # noqa: BLE001 - report everything, never return
            result = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            os.write(write_end, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], deadline - time.monotonic())
            if not ready:
                break
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_end)
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    if not data:
        return {"error": f"probe child gave no answer within {timeout_s:.0f} s"}
    return json.loads(data)


def _sysctl(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _status_field(name: str) -> str:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(name + ":"):
                return line.split()[1]
    return ""


def namespace_hint(user_namespace: bool) -> str:
    """Why namespaces might be refused here, and the fix."""
    if _status_field("Seccomp") not in ("", "0"):
        return (
            "this process already runs under a seccomp filter (a container runtime's "
            "default profile blocks unshare): relax it, or run ember outside the container"
        )
    if not user_namespace:
        if not int(_status_field("CapEff") or "0", 16) & (1 << 21):
            return "root without CAP_SYS_ADMIN (an unprivileged container): grant it"
        return ""
    if _sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns=1): give the interpreter an "
            "AppArmor 'userns' profile, or run the platform as root"
        )
    if _sysctl("/proc/sys/user/max_user_namespaces") == "0":
        return "user.max_user_namespaces=0: raise it, or run the platform as root"
    if _sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return "kernel.unprivileged_userns_clone=0: set it to 1, or run the platform as root"
    return "run the platform as root, or allow unprivileged user namespaces"


def _unshare_one(flags: int, user_namespace: bool) -> dict[str, Any]:
    if user_namespace:
        flags |= _linux.CLONE_NEWUSER
    uid, gid = os.geteuid(), os.getegid()
    _linux.unshare(flags)
    if flags & _linux.CLONE_NEWUSER:
        namespaces.write_id_maps(uid, gid)
    return {"ok": True}


def _namespace_probe(user_namespace: bool) -> dict[str, Any]:
    """In a child: unshare every namespace, fork pid 1, build a private root as enter does."""
    all_flags = 0
    for flag in _NS_FLAGS.values():
        all_flags |= flag
    _unshare_one(all_flags, user_namespace)
    inner = _in_child(_mount_probe, 5.0)
    return {"ok": True, "inner": inner}


def _mount_probe() -> dict[str, Any]:
    result: dict[str, Any] = {"pid": os.getpid()}
    plan = rootfs.MountPlan((), (), MiB, (0, 0), with_proc=True)  # uid 0: root, or userns root
    _linux.unshare(_linux.CLONE_NEWNS)
    result["root"] = list(rootfs.build_root(plan))
    result["proc"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
    return result


def _namespace_statuses(user_namespace: bool, timeout_s: float) -> list[LayerStatus]:
    via = " via an unprivileged user namespace" if user_namespace else ""
    whole = _in_child(lambda: _namespace_probe(user_namespace), timeout_s)
    if "error" not in whole:
        inner = whole["inner"]
        statuses = [
            LayerStatus(Layer.NET_NS, True, f"empty net namespace{via}"),
            LayerStatus(Layer.IPC_UTS_NS, True, f"own ipc and uts namespaces{via}"),
        ]
        if "error" in inner:
            why = f"private root failed: {inner['error']}"
            statuses.append(LayerStatus(Layer.MOUNT_NS, False, why))
            statuses.append(LayerStatus(Layer.PID_NS, inner.get("pid") == 1, "pid 1" + via))
        else:
            pid_ok = inner["pid"] == 1 and inner["proc"] == ["1"]
            statuses.append(LayerStatus(Layer.MOUNT_NS, True, f"tmpfs root + pivot_root{via}"))
            statuses.append(LayerStatus(Layer.PID_NS, pid_ok, f"worker is pid 1{via}"))
        return statuses
    # Something failed: find out which namespace, one per child.
    hint = namespace_hint(user_namespace)
    statuses = []
    for layer, flag in _NS_FLAGS.items():
        one = _in_child(lambda flag=flag: _unshare_one(flag, user_namespace), timeout_s)
        if "error" in one:
            statuses.append(LayerStatus(layer, False, f"{one['error']}; {hint}".strip("; ")))
        else:
            statuses.append(LayerStatus(layer, True, f"unshare works{via}"))
    mount = _in_child(lambda: _unshare_one(_linux.CLONE_NEWNS, user_namespace), timeout_s)
    reason = mount.get("error", whole["error"])
    statuses.append(LayerStatus(Layer.MOUNT_NS, False, f"{reason}; {hint}".strip("; ")))
    return statuses


def _confine_probe(abi: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    module, reason = seccomp.load_pyseccomp()  # before Landlock hides the module's file
    if abi:
        try:
            landlock.restrict([], abi)
            result["landlock"] = "ok"
        except OSError as exc:
            result["landlock"] = str(exc)
    if module is None:
        result["seccomp"] = reason
    else:
        try:
            skipped = seccomp.install(module)
            os.fork()  # must fail with EPERM
            result["seccomp"] = "filter loaded but fork() still works"
        except PermissionError:
            result["seccomp"] = "ok"
            result["skipped"] = list(skipped)
        except OSError as exc:
            result["seccomp"] = f"loading the filter failed: {exc}"
    return result


def _landlock_abi() -> tuple[int, str]:
    try:
        return landlock.abi_version(), ""
    except OSError as exc:
        return 0, landlock.unavailable_reason(exc)


def _landlock_reason(abi: int) -> str:
    parts = [f"ABI {abi}: filesystem rules"]
    if abi >= 4:
        parts.append("TCP bind/connect denied")
    if abi >= 6:
        parts.append("abstract sockets and signals scoped")
    return ", ".join(parts)


def probe(disabled: frozenset[Layer] = frozenset(), timeout_s: float = 5.0) -> LayerReport:
    """Probe every layer (about 10-30 ms); ``disabled`` layers are reported as forced off."""
    euid = os.geteuid()
    user_namespace = euid != 0
    statuses = [
        LayerStatus(Layer.HYGIENE, True, "setsid, pdeathsig, fds, env, umask, not dumpable"),
        LayerStatus(Layer.RLIMITS, True, "data, nofile, fsize, core, cpu backstop"),
    ]
    statuses += _namespace_statuses(user_namespace, timeout_s)
    if euid == 0:
        statuses.append(LayerStatus(Layer.UID, True, "root: a pool uid per deployment"))
    else:
        statuses.append(LayerStatus(Layer.UID, False, "not root: workers share this uid"))
    abi, why = _landlock_abi()
    confined = _in_child(lambda: _confine_probe(abi), timeout_s)
    if abi and confined.get("landlock") == "ok":
        statuses.append(LayerStatus(Layer.LANDLOCK, True, _landlock_reason(abi)))
    else:
        statuses.append(LayerStatus(Layer.LANDLOCK, False, why or str(confined)))
    sc = confined.get("seccomp", confined.get("error", "no answer"))
    ok = sc == "ok"
    statuses.append(
        LayerStatus(Layer.SECCOMP, ok, "nofork, no INET sockets, kernel surface" if ok else sc)
    )
    statuses.append(LayerStatus(Layer.CGROUP, *cgroup.probe()))
    order = list(Layer)
    statuses.sort(key=lambda s: order.index(s.layer))
    final = []
    for status in statuses:
        if status.layer in disabled and status.layer not in ALWAYS_AVAILABLE:
            was = "available" if status.available else "unavailable"
            status = LayerStatus(status.layer, False, f"forced off by configuration ({was})")
        final.append(status)
    return LayerReport(tuple(final), euid, user_namespace, abi or None, platform.release())
