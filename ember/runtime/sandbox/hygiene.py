"""L0: process hygiene, applied first in every sandboxed process.

What it stops (isolation.md §6.2, §8 items 7, 12): ``kill(0, ...)`` reaching the zygote's
process group; orphans outliving their parent; host fds and environment leaking into the worker;
``/proc/<pid>/mem`` peeking and core dumps.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Iterable, Mapping

from ember.runtime.sandbox import _linux
from ember.runtime.sandbox.errors import SandboxError

MALLOC_ARENAS = 2


def new_session() -> None:
    """Leave the caller's session and process group, so ``kill(0, sig)`` reaches only us."""
    try:
        os.setsid()
    except PermissionError:
        if os.getsid(0) != os.getpid():  # EPERM only because we already lead a session is fine
            raise


def die_with_parent(expected_parent: int | None) -> None:
    """SIGKILL this process when its parent dies; fail if the parent is already gone.

    Must be called again after any uid/gid change: the kernel clears the setting then.
    """
    _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is not None and os.getppid() != expected_parent:
        raise SandboxError("hygiene", "parent died before PR_SET_PDEATHSIG took effect")


def close_fds(keep: Iterable[int]) -> None:
    """Close every fd except ``keep``; point stdin/stdout/stderr at /dev/null unless kept.

    Python objects in the caller that still own a closed fd must never be closed later (their
    number may be reused): the runtime detaches them (``socket.detach()``) before calling enter.
    """
    kept = sorted({fd for fd in keep if fd >= 0})
    devnull = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    for fd in (0, 1, 2):
        if fd not in kept:
            os.dup2(devnull, fd, inheritable=False)
    if devnull not in kept and devnull > 2:
        os.close(devnull)
    limit = max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 65536)
    low = 3
    for fd in kept:
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, limit)


def reset_signals() -> None:
    """Forget the caller's signal setup: its wakeup fd (a number that ``close_fds`` frees and
    the worker may reuse: a signal would write a byte into that fd), handlers and ignored
    signals it set (a zygote ignores SIGINT and SIGTERM), and blocked signals. What a fresh
    Python process has stays: SIGINT raises KeyboardInterrupt, SIGPIPE and SIGXFSZ ignored."""
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    python_defaults = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGPIPE: signal.SIG_IGN,
        signal.SIGXFSZ: signal.SIG_IGN,
    }
    for sig in signal.valid_signals():
        wanted = python_defaults.get(sig, signal.SIG_DFL)
        try:
            if signal.getsignal(sig) != wanted:
                signal.signal(sig, wanted)
        except (OSError, ValueError):
            continue  # SIGKILL, SIGSTOP and the real-time signals libc reserves


def scrub_exec_environment() -> None:
    """Zero the environment block the process was exec'd with.

    ``/proc/<pid>/environ`` shows that block, not ``os.environ``: a zygote forked from a process
    that held secrets at exec time would otherwise hand them to every worker (pitfall 12). Call
    only after ``os.environ`` was cleared, so libc holds no pointer into the block.
    """
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return
    fields = stat[stat.rindex(b")") + 2 :].split()
    # Fields 50 and 51 of stat(5) (1-based, comm is field 2): env_start, env_end.
    env_start, env_end = int(fields[47]), int(fields[48])
    if 0 < env_start < env_end:
        ctypes.memset(env_start, 0, env_end - env_start)


def explicit_environment(env: Mapping[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)
    scrub_exec_environment()


def apply_early(keep_fds: Iterable[int], env: Mapping[str, str]) -> None:
    """Session, fds, environment, umask and malloc arenas: everything not tied to identity."""
    new_session()
    reset_signals()
    close_fds(keep_fds)
    explicit_environment(env)
    os.umask(0o077)
    # MALLOC_ARENA_MAX in the environment is read only at malloc's first use, long past here;
    # mallopt sets the same limit in the running process (fewer arenas, less address space).
    _linux.mallopt(_linux.M_ARENA_MAX, MALLOC_ARENAS)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def apply_late() -> None:
    """Not dumpable: no core dumps, /proc/<pid>/{mem,environ,...} closed to same-uid peers.

    Applied after the uid switch, which resets the flag.
    """
    _linux.prctl(_linux.PR_SET_DUMPABLE, 0)
