"""``enter()``: turn a freshly forked, single-threaded child into a sandboxed worker.

Process shapes (host pids; the caller is what the zygote forked, call it C):

* With a pid namespace or a cgroup (every profile but dev): C unshares the user (unprivileged
  only), pid, net, ipc and uts namespaces and forks W. ``enter`` **returns only in W**, the
  worker, which is pid 1 of the new pid namespace and applies the remaining layers itself. C never
  returns: it becomes W's monitor (~2.4 MiB PSS), reports W's host pid, waits for W, removes W's
  cgroups and exits with W's status (a signal death is re-raised on itself). C's parent reaps C.
* Otherwise (dev): no fork; ``enter`` returns in C, which is the worker.

The supervisor reads the host pids from the startup report (``report.read_startup``). It watches
``worker_pid``'s CPU clock and SIGKILLs ``worker_pid``; the kernel kills everything else in the
pid namespace with it, and the monitor follows. If C is killed instead, W gets SIGKILL from
PR_SET_PDEATHSIG. Any failure before user code runs is reported and ends the process with
``EXIT_SANDBOX_FAILED``: ``enter`` never returns a half-sandboxed worker.
"""

from __future__ import annotations

import gc
import importlib
import os
import signal
from collections.abc import Iterable
from types import ModuleType
from typing import NoReturn

from ember.runtime.sandbox import (
    cgroup,
    hygiene,
    identity,
    landlock,
    namespaces,
    rlimits,
    rootfs,
    seccomp,
)
from ember.runtime.sandbox.errors import MinimumLayersMissing, SandboxError
from ember.runtime.sandbox.report import EXIT_SANDBOX_FAILED, write_record
from ember.runtime.sandbox.spec import (
    NAMESPACE_LAYERS,
    AppliedLayers,
    Layer,
    SandboxSpec,
    check_minimum,
)


def _fail(report_fd: int | None, stage: str, exc: BaseException) -> NoReturn:
    if report_fd is not None:
        try:
            error = str(exc) if isinstance(exc, SandboxError) else f"{type(exc).__name__}: {exc}"
            write_record(report_fd, {"type": "failed", "stage": stage, "error": error})
        except OSError:
            pass
    os._exit(EXIT_SANDBOX_FAILED)


def _single_threaded() -> None:
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise SandboxError("hygiene", f"enter() needs a single-threaded process, found {threads}")


def _parent_alive(lifeline: int) -> None:
    """EOF on the lifeline pipe means the monitor is gone: stop before it is too late."""
    os.set_blocking(lifeline, False)
    try:
        if os.read(lifeline, 1) == b"":
            os._exit(EXIT_SANDBOX_FAILED)
    except BlockingIOError:
        pass


class _Worker:
    """The worker-side half: everything applied after the fork, in the order of §6.5."""

    def __init__(
        self,
        spec: SandboxSpec,
        report_fd: int | None,
        landlock_abi: int | None,
        pyseccomp: ModuleType | None,
        landlock_reads: list[str],
    ) -> None:
        self.spec = spec
        self.report_fd = report_fd
        self.landlock_abi = landlock_abi
        self.pyseccomp = pyseccomp
        self.landlock_reads = landlock_reads
        self.stage = "hygiene"

    def run(
        self, plan: rootfs.MountPlan | None, lifeline: int | None, parent: int | None
    ) -> AppliedLayers:
        spec, layers = self.spec, self.spec.layers
        try:
            # The caller's /proc still belongs to the supervisor's pid namespace: through it
            # "self" is our pid out there (os.getpid() is 1 once in a new pid namespace).
            host_pid = int(os.readlink("/proc/self")) if lifeline is not None else os.getpid()
            if lifeline is not None:  # forked
                hygiene.new_session()
                hygiene.die_with_parent(None)  # getppid() is 0 across a pid namespace
                # With cgroups, wait until the monitor has put us in them; otherwise only
                # make sure it is still there (it may have died before PDEATHSIG was set).
                if Layer.CGROUP in layers and os.read(lifeline, 1) != b"g":
                    os._exit(EXIT_SANDBOX_FAILED)  # the monitor already reported why
                _parent_alive(lifeline)
            root_entries: tuple[str, ...] = ()
            if plan is not None:
                self.stage = "mount_ns"
                namespaces.enter_mount_namespace()
                root_entries = rootfs.build_root(plan)
            if Layer.IPC_UTS_NS in layers:
                self.stage = "ipc_uts_ns"
                namespaces.set_hostname(spec.hostname)
            ruleset = None
            if Layer.LANDLOCK in layers:
                self.stage = "landlock"  # opened as root: a pool uid may not reach every path
                rules = landlock.rules_for(
                    self.landlock_reads,
                    rootfs.TEMP_DIR if plan else _str_or_none(spec.host_temp_dir),
                    proc_self=Layer.PID_NS in layers or plan is None,
                    list_root=plan is not None,
                )
                ruleset = landlock.create_ruleset(rules, self.landlock_abi or 1)
            self.stage = "uid"
            if Layer.UID in layers:
                identity.switch_to_pool_uid(spec.uid or 0, spec.effective_gid or 0)
                hygiene.die_with_parent(parent)  # a uid change clears PDEATHSIG
                if lifeline is not None:
                    _parent_alive(lifeline)
            elif layers - {Layer.HYGIENE, Layer.RLIMITS, Layer.CGROUP}:
                identity.drop_capabilities()
            hygiene.apply_late()
            self.stage = "rlimits"
            rlimits.apply(rlimits.limits_for(spec, per_deployment_uid=Layer.UID in layers))
            if ruleset is not None:
                self.stage = "landlock"
                landlock.restrict_self(ruleset)
            skipped: tuple[str, ...] = ()
            if Layer.SECCOMP in layers and self.pyseccomp is not None:
                self.stage = "seccomp"
                program, skipped = seccomp.compiled(self.pyseccomp)
                seccomp.load_compiled(program)
            self.stage = "ready"
            applied = AppliedLayers(
                layers=layers,
                profile_name=spec.profile_name,
                landlock_abi=self.landlock_abi,
                host_pid=host_pid,
                uid=os.getuid(),
                gid=os.getgid(),
                code_dir=rootfs.CODE_DIR if plan else str(spec.code_dir),
                temp_dir=rootfs.TEMP_DIR if plan else _str_or_none(spec.host_temp_dir),
                root_entries=root_entries,
                seccomp_skipped=skipped,
            )
            if self.report_fd is not None:
                write_record(self.report_fd, {"type": "ready", "applied": applied.to_dict()})
                os.close(self.report_fd)
            if lifeline is not None:
                os.close(lifeline)
            importlib.invalidate_caches()  # directory listings changed under pivot_root
            return applied
        except BaseException as exc:  # noqa: BLE001 - nothing may escape half-sandboxed
            _fail(self.report_fd, self.stage, exc)


def _landlock_reads(spec: SandboxSpec, plan: rootfs.MountPlan | None) -> list[str]:
    """Paths the worker may read, computed before anything changes (imports included)."""
    if plan is not None:
        return list(plan.read_paths())
    reads = [os.path.realpath(p) for p in rootfs.SYSTEM_DIRS + rootfs.SYSTEM_LIB_DIRS]
    reads += list(rootfs.runtime_paths()) + list(rootfs.SYSTEM_FILES)
    return reads + [str(spec.code_dir)] + [str(p) for p in spec.extra_ro_paths]


def _str_or_none(path: object) -> str | None:
    return None if path is None else str(path)


def _monitor(
    worker_pid: int,
    lifeline: int,
    cgroups: tuple[str, ...],
    report_fd: int | None,
    close: Iterable[int],
) -> NoReturn:
    """The caller's fate once the worker is forked: report, release, reap, clean up, mirror."""
    gc.disable()  # a collection would touch every object and un-share the zygote's pages
    for fd in close:
        os.close(fd)  # above all the IPC socket: the supervisor must see EOF when W dies
    try:
        if cgroups:
            cgroup.attach(cgroups, worker_pid)
        if report_fd is not None:
            write_record(
                report_fd,
                {
                    "type": "pids",
                    "worker_pid": worker_pid,
                    "monitor_pid": os.getpid(),
                    "cgroups": list(cgroups),
                },
            )
            os.close(report_fd)
            report_fd = None
        if cgroups:  # only then does the worker wait for this (otherwise it may be gone)
            os.write(lifeline, b"g")
    except BaseException as exc:  # noqa: BLE001
        os.kill(worker_pid, signal.SIGKILL)
        os.waitpid(worker_pid, 0)
        cgroup.remove(cgroups)
        _fail(report_fd, "monitor", exc)
    hygiene.apply_late()
    _, status = os.waitpid(worker_pid, 0)
    cgroup.remove(cgroups)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def enter(
    spec: SandboxSpec, ipc_fd: int, *, report_fd: int | None = None, keep_fds: Iterable[int] = ()
) -> AppliedLayers:
    """Sandbox the calling process per ``spec``; returns in the worker (see the module doc).

    Call it in a freshly forked, single-threaded child before any user code is imported.
    ``ipc_fd`` (the isolate's socketpair end), ``report_fd`` (write end of a pipe for the
    startup report, closed once the worker is ready) and ``keep_fds`` stay open; every other fd
    is closed and stdin/stdout/stderr point at /dev/null unless listed in ``keep_fds``.
    """
    layers = spec.layers
    stage = "prepare"
    try:
        if spec.require_minimum:
            stage = "minimum"
            check = check_minimum(layers)
            if not check.met:
                raise MinimumLayersMissing(spec.profile_name, check.missing, check.explanation)
        stage = "prepare"
        _single_threaded()
        pyseccomp = None
        if Layer.SECCOMP in layers:
            stage = "seccomp"
            pyseccomp, reason = seccomp.load_pyseccomp()
            if pyseccomp is None:
                raise SandboxError("seccomp", reason)
        landlock_abi = None
        if Layer.LANDLOCK in layers:
            stage = "landlock"
            landlock_abi = landlock.abi_version()
        stage = "uid"
        if layers & {Layer.UID, Layer.CGROUP} and os.geteuid() != 0:
            raise SandboxError("uid", "the uid and cgroup layers need root")
        user_namespace = spec.needs_user_namespace()
        if Layer.UID in layers:
            owner = (spec.uid or 0, spec.effective_gid or 0)
        elif user_namespace:
            owner = (0, 0)
        else:
            owner = (os.geteuid(), os.getegid())
        plan = None
        if Layer.MOUNT_NS in layers:
            stage = "mount_ns"
            plan = rootfs.build_plan(spec, temp_owner=owner, with_proc=Layer.PID_NS in layers)
        landlock_reads = _landlock_reads(spec, plan) if Layer.LANDLOCK in layers else []
        stage = "rlimits"
        rlimits.check_headroom(spec)
        stage = "hygiene"
        parent = os.getppid()
        hygiene.die_with_parent(parent)
        hygiene.apply_early(
            {ipc_fd, *keep_fds} | ({report_fd} if report_fd is not None else set()), spec.env
        )
        if layers & NAMESPACE_LAYERS:
            stage = "namespaces"
            namespaces.enter_outer(layers, user_namespace)
            hygiene.die_with_parent(parent)
        cgroups: tuple[str, ...] = ()
        if Layer.CGROUP in layers:
            stage = "cgroup"
            name = cgroup.group_name(spec.deployment_id, os.getpid())
            limits = cgroup.CgroupLimits(spec.memory_limit, spec.nproc, spec.cpu_quota)
            cgroups = cgroup.create(name, limits, spec.cpu_nest)
    except BaseException as exc:  # noqa: BLE001
        _fail(report_fd, stage, exc)
    worker = _Worker(spec, report_fd, landlock_abi, pyseccomp, landlock_reads)
    if not spec.has_monitor:
        if report_fd is not None:
            try:
                write_record(
                    report_fd,
                    {"type": "pids", "worker_pid": os.getpid(), "monitor_pid": None, "cgroups": []},
                )
            except BaseException as exc:  # noqa: BLE001
                _fail(report_fd, "report", exc)
        return worker.run(plan, None, parent)
    lifeline, go = os.pipe()
    try:
        pid = os.fork()
    except BaseException as exc:  # noqa: BLE001
        cgroup.remove(cgroups)
        _fail(report_fd, "fork", exc)
    if pid == 0:
        os.close(go)
        return worker.run(plan, lifeline, None)
    os.close(lifeline)
    _monitor(pid, go, cgroups, report_fd, [ipc_fd, *keep_fds])


def preload() -> None:
    """Import what ``enter`` needs before it hides the filesystem (call it in the zygote).

    Loading pyseccomp runs ``ldconfig`` once to find libseccomp, compiling the filter costs
    ~2 ms of ctypes calls and finding the runtime's paths ~2 ms of sysconfig: in the zygote
    they are paid once instead of in every worker.
    """
    rootfs.runtime_paths()
    pyseccomp, _ = seccomp.load_pyseccomp()
    if pyseccomp is not None:
        seccomp.compiled(pyseccomp)
