"""Run a function inside a freshly sandboxed worker and collect what happened.

The test process plays the zygote and the supervisor: it forks a child that calls ``enter`` and
then runs an attack (a plain function, already imported, so nothing needs importing across the
new root), reads the startup report, reads the attack's JSON result over the IPC socketpair and
afterwards checks that no process of the worker's pid namespace or pool uid is left.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import struct
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from ember.runtime.sandbox import SandboxError, SandboxSpec, SandboxStartup, enter, read_startup
from tests.sandbox import unpriv

_LEN = struct.Struct(">I")


@dataclasses.dataclass
class Run:
    startup: SandboxStartup | None
    error: SandboxError | None
    result: dict[str, Any] | None
    exit_status: int | None  # of the process that called enter (the monitor)
    pid_namespace: str | None  # the worker's, as a host /proc link target
    leftovers: list[int]  # processes left in that namespace or under the pool uid afterwards


def send_json(sock: socket.socket, value: dict[str, Any]) -> None:
    data = json.dumps(value).encode()
    sock.sendall(_LEN.pack(len(data)) + data)


def recv_json(sock: socket.socket, timeout_s: float) -> dict[str, Any] | None:
    sock.settimeout(timeout_s)
    try:
        header = _recv_exact(sock, _LEN.size)
        if header is None:
            return None
        body = _recv_exact(sock, _LEN.unpack(header)[0])
        return None if body is None else json.loads(body)
    except TimeoutError:
        return None


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def namespace_members(link: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == link:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def uid_members(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _child(
    spec: SandboxSpec,
    sock: socket.socket,
    report_w: int,
    as_uid: int | None,
    attack: Callable[..., dict[str, Any]],
    args: tuple[Any, ...],
    linger: bool,
) -> None:
    try:
        if as_uid is not None:
            unpriv.become(as_uid, [spec.code_dir, *spec.extra_ro_paths])
        keep = (2,) if os.environ.get("EMBER_SANDBOX_DEBUG") else ()
        enter(spec, sock.fileno(), report_fd=report_w, keep_fds=keep)
        try:
            result = attack(*args)
        except BaseException as exc:  # noqa: BLE001
            result = {"raised": f"{type(exc).__name__}: {exc}", "tb": traceback.format_exc()}
        send_json(sock, result)
        if linger:  # stay alive until the test closes its end (or kills us)
            sock.settimeout(None)
            sock.recv(1)
    finally:
        os._exit(0)


def run_sandboxed(
    spec: SandboxSpec,
    attack: Callable[..., dict[str, Any]],
    *args: Any,
    as_uid: int | None = None,
    timeout_s: float = 10.0,
    linger: bool = False,
    on_start: Callable[[Run], None] | None = None,
    while_alive: Callable[[Run], None] | None = None,
    kill: bool = False,
    read_result: bool = True,
) -> Run:
    """Fork, sandbox, run ``attack(*args)``; then end the worker (close its socket, or SIGKILL
    it when ``kill``) and wait for the monitor. ``on_start`` runs once the worker reported
    ready, ``while_alive`` once its result is in (with ``linger`` it is still alive then)."""
    parent_sock, child_sock = socket.socketpair()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        parent_sock.close()
        os.close(report_r)
        _child(spec, child_sock, report_w, as_uid, attack, args, linger)
    child_sock.close()
    os.close(report_w)
    run = Run(None, None, None, None, None, [])
    try:
        try:
            run.startup = read_startup(report_r, timeout_s)
            try:
                run.pid_namespace = os.readlink(f"/proc/{run.startup.worker_pid}/ns/pid")
            except OSError:
                pass
        except SandboxError as exc:
            run.error = exc
        if run.startup is not None:
            if on_start is not None:
                on_start(run)
            if read_result:
                run.result = recv_json(parent_sock, timeout_s)
            if while_alive is not None:
                while_alive(run)
            if kill:
                os.kill(run.startup.worker_pid, signal.SIGKILL)
    finally:
        parent_sock.close()
        os.close(report_r)
        run.exit_status = _reap(pid, timeout_s)
    if run.pid_namespace and run.startup and run.startup.monitor_pid is not None:
        run.leftovers += namespace_members(run.pid_namespace)
    pool_uid = spec.uid if spec.uid is not None else as_uid
    if pool_uid is not None:
        run.leftovers += uid_members(pool_uid)
    return run


def _reap(pid: int, timeout_s: float) -> int | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def errno_of(call: Callable[[], object]) -> str:
    """``"ok"`` or the errno name (``"EPERM"``...) or the exception class of ``call()``."""
    import errno as errno_names

    try:
        call()
    except OSError as exc:
        return errno_names.errorcode.get(exc.errno or 0, type(exc).__name__)
    except BaseException as exc:  # noqa: BLE001
        return type(exc).__name__
    return "ok"


def close_all(items: Iterable[socket.socket]) -> None:
    for item in items:
        item.close()
