"""The zygote: a small, warm process that forks isolates on the supervisor's request.

Started by ``Spawner`` with an explicit tiny environment (no secrets), it imports the isolate
runtime once (never torch, never user code, never a deployment's values), freezes its heap for
the garbage collector, then loops:

    supervisor --["spawn", id, ChildSpec] + SCM_RIGHTS(isolate socket)--> zygote
    zygote: fork -> child: hygiene, PrepareChild hook, isolate main (never returns)
    zygote --["spawned", id, pid] / ["failed", id, message] / ["exited", pid, status]--> supervisor

The control socket is SOCK_SEQPACKET, so each message (and its descriptor) arrives whole. The
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


def main(control_fd: int, prepare_target: str) -> None:
    """Run the zygote loop on ``control_fd`` (called by the bootstrap command line)."""
    from ember.bindings.base import import_target
    from ember.runtime import child
    from ember.runtime.isolate.main import ISOLATE_PATH

    child.set_pdeathsig(signal.SIGKILL)
    child.set_child_subreaper()
    # Ctrl-C in a terminal reaches the whole process group: the supervisor decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.path.insert(0, ISOLATE_PATH)
    for module in PRELOAD:
        __import__(module)
    _preload_binding_clients()
    prepare = import_target(prepare_target)
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
                    message, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, 1)
                except OSError:
                    message, fds = b"", []
                if not message:
                    os._exit(0)  # the supervisor closed the control socket
                _spawn(
                    control, message, fds, prepare, child, zygote_pid, [control_fd, wake_r, wake_w]
                )
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
    message: bytes,
    fds: list[int],
    prepare: Any,
    child: Any,
    zygote_pid: int,
    zygote_fds: list[int],
) -> None:
    request = msgpack.unpackb(message, raw=False)
    spawn_id = request[1]
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        _send(control, ["failed", spawn_id, "expected exactly one socket"])
        return
    (ipc_fd,) = fds
    try:
        spec = child.ChildSpec.from_wire(request[2], ipc_fd)
    except (KeyError, TypeError, ValueError) as exc:
        os.close(ipc_fd)
        _send(control, ["failed", spawn_id, f"bad spawn spec: {exc}"])
        return
    pid = os.fork()
    if pid == 0:
        _child_main(spec, prepare, child, zygote_pid)
    os.close(ipc_fd)
    _send(control, ["spawned", spawn_id, pid])


def _child_main(spec: Any, prepare: Any, child: Any, zygote_pid: int) -> None:
    """In the forked child: never returns."""
    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        child.hygiene(spec, zygote_pid)
        host_pid = prepare(spec)
        from ember.runtime.isolate.main import run

        run(spec.ipc_fd, host_pid)
    except BaseException:  # noqa: BLE001 - report and exit; never return into the zygote loop
        try:
            traceback.print_exc()
        finally:
            code = 70
    os._exit(code)


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
    main(int(sys.argv[1]), sys.argv[2])
