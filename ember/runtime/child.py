"""The seam where an isolate child becomes a sandboxed worker, before any user code runs.

The zygote forks on an opaque request: it hands the child the isolate socket (and, for a
sandboxed child, the write end of the startup-report pipe) and nothing else, so that no
deployment's data ever passes through the zygote, whose heap every later isolate inherits
(isolation.md pitfall 13). In the child, ``hygiene`` always runs first (own session, die with
the zygote, no inherited fds but the isolate's socket and the report pipe, an empty
environment); then ``receive_spec`` reads the ``ChildSpec`` the supervisor wrote on the isolate
socket before handing it over (``spec_frame``), and the environment becomes the deployment's
(``apply_environment``). Then the configured ``PrepareChild`` hook runs. ember dev's hook,
``prepare_dev_child``, only sets rlimits. The sandbox (``ember.runtime.sandbox.enter``) plugs in
here: it may unshare namespaces and fork, so that the process returning from the hook is pid 1
of a new pid namespace; it returns that process's *host* pid, which the isolate reports in its
Hello frame (the supervisor polls and kills that pid). A hook that fails raises; the child then
exits without running user code.

The hook is named as ``"module:attr"`` because it is loaded in the zygote process, not passed
as an object. It returns the worker's host pid, or a ``PreparedChild`` that also says where the
deployment's code is inside the sandbox (``/app`` behind a private root). A hook object may
also have ``before_fork(sandboxed)``, which the zygote calls before each fork with the one thing
it knows of the child: whether it will be sandboxed (to warm the sandbox, once).

``DEFAULT_PREPARE`` (``ember.runtime.sandbox_hook:prepare``) serves both kinds of child: an
empty ``ChildSpec.sandbox`` gets ember dev's rlimits, a non-empty one (a ``SandboxSpec`` in wire
form) enters the sandbox and writes the startup report on ``ChildSpec.report_fd``.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import resource
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgpack

from ember.errors import ProtocolError
from ember.runtime.protocol import FRAME_LENGTH

if TYPE_CHECKING:
    from ember.runtime.deployment import Deployment

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
M_ARENA_MAX = -8
DEFAULT_PREPARE = "ember.runtime.sandbox_hook:prepare"
# Room for the interpreter's own mappings and thread stacks above the supervisor's RSS limit;
# RLIMIT_DATA is only a backstop for allocations faster than the supervisor's polling.
DATA_HEADROOM_BYTES = 512 * 1024 * 1024
# A sanity bound on the spec frame: its vars (twice: the sandbox's copy) are bounded by what fits
# the Init frame that follows it (fields.MAX_FRAME_BYTES), its other fields are small.
MAX_SPEC_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """What the child is told about the deployment it will run (nothing secret).

    It travels from the supervisor to the child over the isolate socket, never through the
    zygote; ``ipc_fd`` and ``report_fd`` are descriptor numbers in the child, not on the wire.
    """

    deployment_id: str
    code_dir: str
    ipc_fd: int
    env: Mapping[str, str]
    memory_bytes: int
    nofile: int = 1024
    sandbox: Mapping[str, object] = field(default_factory=dict)  # options for the sandbox hook
    report_fd: int = -1  # write end of the sandbox's startup-report pipe (set by the zygote)

    def to_wire(self) -> dict[str, object]:
        """msgpack-friendly form (supervisor -> child)."""
        return {
            "deployment_id": self.deployment_id,
            "code_dir": self.code_dir,
            "env": dict(self.env),
            "memory_bytes": self.memory_bytes,
            "nofile": self.nofile,
            "sandbox": dict(self.sandbox),
        }

    @classmethod
    def from_wire(cls, value: Mapping[str, object], ipc_fd: int, report_fd: int = -1) -> ChildSpec:
        """Inverse of ``to_wire``; ``ipc_fd`` is the descriptor number in the receiving process."""
        return cls(
            deployment_id=str(value["deployment_id"]),
            code_dir=str(value["code_dir"]),
            ipc_fd=ipc_fd,
            env={str(k): str(v) for k, v in dict(value["env"]).items()},  # type: ignore[call-overload]
            memory_bytes=int(value["memory_bytes"]),  # type: ignore[call-overload]
            nofile=int(value["nofile"]),  # type: ignore[call-overload]
            sandbox=dict(value.get("sandbox") or {}),  # type: ignore[call-overload]
            report_fd=report_fd,
        )


@dataclass(frozen=True, slots=True)
class PreparedChild:
    """What a PrepareChild hook tells the isolate: the pid the supervisor sees it as, and
    where the deployment's code is from inside (None: ``ChildSpec.code_dir`` as it is)."""

    host_pid: int
    code_dir: str | None = None


PrepareChild = Callable[[ChildSpec], "int | PreparedChild"]


def spec_frame(spec: ChildSpec) -> bytes:
    """``spec`` as the first frame on an isolate socket (length prefix, msgpack), for
    ``receive_spec`` in the child; the isolate protocol's frames follow it."""
    payload = msgpack.packb(spec.to_wire(), use_bin_type=True)
    if len(payload) > MAX_SPEC_BYTES:
        raise ProtocolError(f"a spawn spec of {len(payload)} bytes is past {MAX_SPEC_BYTES}")
    return FRAME_LENGTH.pack(len(payload)) + payload


def receive_spec(ipc_fd: int, report_fd: int = -1) -> ChildSpec:
    """In the child, after ``hygiene``: read the spec frame the supervisor wrote on the isolate
    socket, exactly (the protocol's frames follow it in the same stream)."""
    os.set_blocking(ipc_fd, True)  # the isolate makes it non-blocking again once it serves
    (length,) = FRAME_LENGTH.unpack(_read_exactly(ipc_fd, FRAME_LENGTH.size))
    if length > MAX_SPEC_BYTES:
        raise ProtocolError(f"a spawn spec of {length} bytes is past {MAX_SPEC_BYTES}")
    value = msgpack.unpackb(_read_exactly(ipc_fd, length), raw=False)
    if not isinstance(value, dict):
        raise ProtocolError(f"a spawn spec must be a map, not {type(value).__name__}")
    return ChildSpec.from_wire(value, ipc_fd, report_fd)


def _read_exactly(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise ProtocolError("the isolate socket closed before the spawn spec arrived")
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def hygiene(ipc_fd: int, report_fd: int, parent_pid: int) -> None:
    """Process hygiene every isolate gets, sandbox or not (isolation.md §6.2 L0), before it
    knows which deployment it is for: the environment is emptied here, ``apply_environment``
    fills in the deployment's once its spec has been read."""
    os.setsid()  # a kill of our process group never reaches the zygote or supervisor
    set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent_pid:  # the zygote died between fork and prctl
        os._exit(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    if devnull > 2:
        os.close(devnull)
    # Keep fd 2 (the zygote's stderr) for interpreter crash messages; close everything else.
    keep = sorted({0, 1, 2, ipc_fd} | ({report_fd} if report_fd >= 0 else set()))
    start = 3
    for fd in keep:
        if fd >= start:
            os.closerange(start, fd)
            start = fd + 1
    os.closerange(start, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.umask(0o077)
    os.environ.clear()


def apply_environment(spec: ChildSpec) -> None:
    """The deployment's process environment (``child_environment``), into an emptied one."""
    os.environ.clear()
    os.environ.update(spec.env)


def prepare_dev_child(spec: ChildSpec) -> int:
    """ember dev's hook: rlimits only; the worker is this process."""
    apply_rlimits(spec)
    return os.getpid()


def apply_rlimits(spec: ChildSpec) -> None:
    """No core dumps, bounded descriptors, and a data-size backstop above the memory limit."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = spec.nofile if hard == resource.RLIM_INFINITY else min(spec.nofile, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    data = _current_data_bytes() + spec.memory_bytes + DATA_HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    _libc().mallopt(M_ARENA_MAX, 2)  # fewer malloc arenas: threads cost less address space


def set_pdeathsig(sig: int) -> None:
    """Receive ``sig`` when the parent thread exits."""
    _libc().prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def set_child_subreaper() -> None:
    """Become the reaper of orphaned descendants (the zygote reaps sandbox monitors' children)."""
    _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _current_data_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


@functools.cache
def _libc() -> ctypes.CDLL:
    # dlopen(NULL): the running program's symbols, libc's prctl included (no ldconfig lookup).
    return ctypes.CDLL(None, use_errno=True)


def child_environment(deployment: Deployment) -> dict[str, str]:
    """The isolate's process environment: a minimal base plus the deployment's vars (no secrets)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    for name, value in deployment.vars.items():
        env[name] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return env
