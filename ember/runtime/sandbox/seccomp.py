"""L5: the seccomp filter, built with pyseccomp (libseccomp) and loaded last.

Default allow, then EPERM for everything that creates processes or programs (fork, vfork, clone
without CLONE_THREAD or with namespace flags, execve, execveat: "nofork", threads still work),
EACCES for sockets other than AF_UNIX (no INET, raw, packet or netlink sockets), ENOSYS for
clone3 (its flags are in memory the filter cannot read; glibc falls back to clone), and EPERM
for kernel surface a handler never needs: ptrace, process_vm_*, bpf, io_uring, userfaultfd,
keyctl, the mount family, namespaces, modules, perf, clock setting, TIOCSTI, and making
the process dumpable again. isolation.md §2.3.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import socket
from types import ModuleType

from ember.runtime.sandbox import _linux


def load_pyseccomp() -> tuple[ModuleType | None, str]:
    """Import pyseccomp; ``(None, reason)`` when it or libseccomp.so.2 is missing.

    Import it before pivot_root: it locates libseccomp with ``ctypes.util.find_library``, which
    runs ``ldconfig``, and that is neither reachable nor allowed inside the sandbox.
    """
    try:
        import pyseccomp
    except ImportError:
        return None, "pyseccomp is not installed (pip install 'ember[sandbox]')"
    except (OSError, RuntimeError) as exc:
        return None, f"libseccomp.so.2 not usable: {exc} (apt-get install libseccomp2)"
    return pyseccomp, "pyseccomp over libseccomp"


NOFORK = ("fork", "vfork", "execve", "execveat")
DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "name_to_handle_at",
    "open_by_handle_at",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "personality",
    "mknod",
    "mknodat",
    "iopl",
    "ioperm",
    "modify_ldt",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "lookup_dcookie",
    "fanotify_init",
    "move_pages",
    "migrate_pages",
    "sethostname",
    "setdomainname",
    "uselib",
    "nfsservctl",
)
NAMESPACE_CLONE_FLAGS = (
    _linux.CLONE_NEWNS,
    _linux.CLONE_NEWCGROUP,
    _linux.CLONE_NEWUTS,
    _linux.CLONE_NEWIPC,
    _linux.CLONE_NEWUSER,
    _linux.CLONE_NEWPID,
    _linux.CLONE_NEWNET,
)
TIOCSTI = 0x5412
TIOCLINUX = 0x541C


def build_filter(pyseccomp: ModuleType) -> tuple[object, tuple[str, ...]]:
    """The filter, and the deny-list names this kernel/libseccomp does not know (skipped)."""
    sc = pyseccomp
    perm = sc.ERRNO(errno.EPERM)
    filt = sc.SyscallFilter(sc.ALLOW)
    skipped: list[str] = []

    def rule(action: int, name: str, *args: object) -> None:
        try:
            filt.add_rule(action, name, *args)
        except (OSError, ValueError, TypeError):
            skipped.append(name)  # not a syscall on this architecture (e.g. fork on aarch64)

    for name in NOFORK + DENIED:
        rule(perm, name)
    # clone(2): flags are argument 0 on x86_64 and aarch64.
    rule(perm, "clone", sc.Arg(0, sc.MASKED_EQ, _linux.CLONE_THREAD, 0))
    for flag in NAMESPACE_CLONE_FLAGS:
        rule(perm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    rule(sc.ERRNO(errno.ENOSYS), "clone3")
    rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    rule(sc.ERRNO(errno.EACCES), "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    rule(perm, "ioctl", sc.Arg(1, sc.EQ, TIOCSTI))
    rule(perm, "ioctl", sc.Arg(1, sc.EQ, TIOCLINUX))
    # Once non-dumpable, stay so: /proc/<pid>/{environ,mem,maps} remain closed.
    rule(perm, "prctl", sc.Arg(0, sc.EQ, _linux.PR_SET_DUMPABLE))
    filt.set_attr(sc.Attr.CTL_NNP, 1)
    try:
        filt.set_attr(sc.Attr.CTL_TSYNC, 1)  # every thread, should any exist
    except OSError:
        pass
    return filt, tuple(skipped)


def install(pyseccomp: ModuleType) -> tuple[str, ...]:
    """Build and load the filter with libseccomp (the reference path; ~1.7 ms of ctypes calls).

    Returns the skipped syscall names."""
    filt, skipped = build_filter(pyseccomp)
    filt.load()  # type: ignore[attr-defined]
    return skipped


@functools.cache
def compiled(pyseccomp: ModuleType) -> tuple[bytes, tuple[str, ...]]:
    """The filter as a classic-BPF program, built once per process (the zygote, via preload)."""
    filt, skipped = build_filter(pyseccomp)
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb", closefd=True) as sink:
            filt.export_bpf(sink)  # type: ignore[attr-defined]
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_end)
    return b"".join(chunks), skipped


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


SECCOMP_MODE_FILTER = 2
PR_SET_SECCOMP = 22
BPF_INSTRUCTION_SIZE = 8


def load_compiled(program: bytes) -> None:
    """Load a BPF program from ``compiled`` (the fast path: one prctl, no libseccomp calls).

    The calling process must be single-threaded (``enter`` checks): prctl filters only the
    calling thread, and every thread created later inherits it.
    """
    if not program or len(program) % BPF_INSTRUCTION_SIZE:
        raise OSError(errno.EINVAL, f"not a BPF program ({len(program)} bytes)")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // BPF_INSTRUCTION_SIZE, ctypes.addressof(buffer))
    _linux.prctl(_linux.PR_SET_NO_NEW_PRIVS, 1)
    _linux.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
