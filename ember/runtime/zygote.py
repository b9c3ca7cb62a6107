"""The zygote: a small, warm process that forks isolates on the supervisor's request.

Started by ``Spawner`` with an explicit tiny environment (no secrets), it imports the isolate
runtime once (never torch, never user code), freezes its heap for the garbage collector, then
loops:

    supervisor --["spawn", id] + SCM_RIGHTS(isolate socket[, report pipe])--> zygote
    zygote: fork -> child: hygiene, read its ChildSpec from the isolate socket,
                   PrepareChild hook, isolate main (never returns)
    zygote --["spawned", id, pid] / ["failed", id, message] / ["exited", pid, status]--> supervisor
    supervisor --["probe", id, [disabled layers]]--> zygote --["probed", id, report dict]-->
    supervisor --["kill_uid", id, uid]--> zygote --["uid_killed", id, found]-->

No deployment's data ever passes through here: every isolate is forked from this process and
inherits its heap, where freed buffers and strings keep their bytes, so a spec that went
through it would be readable by every isolate forked after (isolation.md pitfall 13). A spawn
request is opaque: the zygote forks and hands the child its descriptors without knowing whose
it is. The supervisor wrote the child's ``ChildSpec`` (vars, code dir, limits, sandbox plan) on
the isolate socket before handing it over; the child reads it after the fork, before anything
else but hygiene. What the zygote does learn says nothing about a tenant: how many descriptors
came (a second one, the write end of the supervisor's startup-report pipe, means a sandboxed
child: the hook's ``before_fork`` warms the sandbox for it), the layers an operator disabled
(``probe``), and a pool uid number (``kill_uid``). The report pipe goes from the sandboxed child
to the supervisor, which reads it; the zygote only closes its copy after forking.

Probing runs the sandbox's probe in throwaway children of this single-threaded process, where
forking is safe. ``kill_uid`` kills every process of a pool uid (a child that becomes that uid
and sends ``kill(-1, SIGKILL)``), so that a uid is never handed to another deployment while
something of the last one lives.

The control socket is SOCK_SEQPACKET, so each message (and its descriptors) arrives whole. The
zygote dies with the supervisor (PDEATHSIG) and reaps its children (and, as a subreaper, any
orphaned descendants).
"""

from __future__ import annotations

import gc
import os
import selectors
import signal
import socket
import sys
import traceback
from typing import Any

import msgpack

# What every isolate needs, imported before forking so children start warm.
PRELOAD = (
    "asyncio",
    "json",
    "re",
    "datetime",
    "base64",
    "hashlib",
    "random",
    "math",
    "uuid",
    "urllib.parse",
    "dataclasses",
    "typing",
    "collections",
    "functools",
    "itertools",
    "traceback",
    "ember.runtime.isolate.main",
    "ember.bindings.unavailable",
    "workers",
    "js",
    "pyodide.ffi",
)
MAX_MESSAGE = 64 * 1024


def main(control_fd: int, prepare_target: str, preload_targets: str = "") -> None:
    """Run the zygote loop on ``control_fd`` (called by the bootstrap command line)."""
    from ember.bindings.base import import_target
    from ember.runtime import child
    from ember.runtime.isolate.main import ISOLATE_PATH
    from ember.runtime.loop import loop_factory

    child.set_pdeathsig(signal.SIGKILL)
    child.set_child_subreaper()
    # Ctrl-C in a terminal reaches the whole process group: the supervisor decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.path.insert(0, ISOLATE_PATH)
    for module in PRELOAD:
        __import__(module)
    loop_factory()  # imports uvloop (if installed) before forking: isolates run on it
    _preload_binding_clients()
    prepare = import_target(prepare_target)
    for target in filter(None, preload_targets.split(",")):
        import_target(target)()
    control = socket.socket(fileno=control_fd)
    zygote_pid = os.getpid()

    # SIGCHLD wakes the selector through a pipe, so exits are reported promptly.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    gc.collect()
    gc.freeze()  # forked children share these pages instead of touching them on their first GC

    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                try:
                    message, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, 2)
                except OSError:
                    message, fds = b"", []
                if not message:
                    os._exit(0)  # the supervisor closed the control socket
                request = msgpack.unpackb(message, raw=False)
                if request[0] == "spawn":
                    _spawn(control, request[1], fds, prepare, child, zygote_pid)
                else:
                    for fd in fds:
                        os.close(fd)
                    _answer(control, request)
            else:
                os.read(wake_r, 4096)
        _reap(control)


def _preload_binding_clients() -> None:
    """Import ``ember.bindings.<type>.client`` for every binding package (isolate-side code)."""
    import importlib
    import pkgutil

    import ember.bindings

    for info in pkgutil.iter_modules(ember.bindings.__path__):
        if info.ispkg:
            try:
                importlib.import_module(f"ember.bindings.{info.name}.client")
            except ModuleNotFoundError:
                continue


def _spawn(
    control: socket.socket,
    spawn_id: int,
    fds: list[int],
    prepare: Any,
    child: Any,
    zygote_pid: int,
) -> None:
    """Fork one isolate for the isolate socket ``fds[0]`` (and report pipe ``fds[1]``, if any)."""
    if len(fds) not in (1, 2):
        for fd in fds:
            os.close(fd)
        _send(control, ["failed", spawn_id, "expected an isolate socket and at most a report pipe"])
        return
    ipc_fd = fds[0]
    report_fd = fds[1] if len(fds) == 2 else -1
    try:
        before_fork = getattr(prepare, "before_fork", None)
        if before_fork is not None:
            before_fork(report_fd >= 0)
        pid = os.fork()
    except Exception as exc:  # noqa: BLE001 - a failed preload or fork fails this spawn only
        for fd in fds:
            os.close(fd)
        _send(control, ["failed", spawn_id, f"could not fork: {type(exc).__name__}: {exc}"])
        return
    if pid == 0:
        _child_main(ipc_fd, report_fd, prepare, child, zygote_pid)
    for fd in fds:
        os.close(fd)  # the report pipe's reader sees its end once the child's writers close
    _send(control, ["spawned", spawn_id, pid])


def _answer(control: socket.socket, request: list[Any]) -> None:
    """Requests other than spawn: probe the sandbox's layers, kill a pool uid's processes."""
    kind, request_id = request[0], request[1]
    try:
        if kind == "probe":
            from ember.runtime.sandbox import Layer, probe

            report = probe(frozenset(Layer(name) for name in request[2]))
            _send(control, ["probed", request_id, report.to_dict()])
        elif kind == "kill_uid":
            _send(control, ["uid_killed", request_id, _kill_uid(int(request[2]))])
        else:
            _send(control, ["error", request_id, f"unknown request {kind!r}"])
    except Exception as exc:  # noqa: BLE001 - answer, never die on a request
        _send(control, ["error", request_id, f"{type(exc).__name__}: {exc}"])


def _kill_uid(uid: int) -> bool:
    """SIGKILL every process of ``uid`` (never 0); True if there was any."""
    if uid <= 0:
        raise ValueError("refusing to kill the processes of uid 0")
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            try:
                os.kill(-1, signal.SIGKILL)  # as that uid: reaches only its processes
                code = 1
            except ProcessLookupError:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise OSError(f"the uid-killer child failed with status {code}")
    return code == 1


def _child_main(ipc_fd: int, report_fd: int, prepare: Any, child: Any, zygote_pid: int) -> None:
    """In the forked child: never returns."""
    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        child.hygiene(ipc_fd, report_fd, zygote_pid)
        try:
            spec = child.receive_spec(ipc_fd, report_fd)
        except BaseException as exc:
            _report_spec_failure(report_fd, exc)
            raise
        child.apply_environment(spec)
        prepared = prepare(spec)
        from ember.runtime.isolate.main import run

        if isinstance(prepared, child.PreparedChild):
            run(spec.ipc_fd, prepared.host_pid, prepared.code_dir)
        else:
            run(spec.ipc_fd, prepared)
    except BaseException:  # noqa: BLE001 - report and exit; never return into the zygote loop
        try:
            traceback.print_exc()
        finally:
            code = 70
    os._exit(code)


def _report_spec_failure(report_fd: int, exc: BaseException) -> None:
    """A sandboxed child that got no spec says so on its startup report (stage ``spec``)."""
    if report_fd < 0:
        return
    from ember.runtime.sandbox.report import write_record

    try:
        write_record(report_fd, {"type": "failed", "stage": "spec", "error": f"{exc}"})
    except OSError:
        pass


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        _send(control, ["exited", pid, code])


def _send(control: socket.socket, message: list[Any]) -> None:
    try:
        control.sendall(msgpack.packb(message, use_bin_type=True))
    except OSError:
        os._exit(0)  # the supervisor is gone


if __name__ == "__main__":  # pragma: no cover - started by Spawner
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
