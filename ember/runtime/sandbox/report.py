"""The startup report: how the supervisor learns which host pid to watch and kill.

``enter()`` writes length-prefixed JSON records (4-byte big-endian length, then UTF-8 JSON) on
the optional ``report_fd``, all before any user code runs, then closes it:

Each record is written with one ``write`` below PIPE_BUF, so the two writers never interleave;
the two records may arrive in either order.

1. ``{"type": "pids", "worker_pid": H, "monitor_pid": M | null, "cgroups": [...]}``, written by
   the monitor (or by the worker itself when there is no monitor). ``worker_pid`` is the host pid
   of the process that runs user code (pid 1 of its pid namespace): read its CPU clock, SIGKILL
   it. ``monitor_pid`` is the caller's own pid, which reaps the worker and exits with its status.
2. ``{"type": "ready", "applied": {...AppliedLayers...}}`` from the worker once every layer is on,
   or ``{"type": "failed", "stage": ..., "error": ...}`` from whichever process failed; the failing
   process then exits with status ``EXIT_SANDBOX_FAILED`` and user code never runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import struct
import time
from typing import Any

from ember.runtime.sandbox.errors import SandboxError
from ember.runtime.sandbox.spec import AppliedLayers

EXIT_SANDBOX_FAILED = 121
_HEADER = struct.Struct(">I")
MAX_RECORD = 64 * 1024


def write_record(fd: int, record: dict[str, Any]) -> None:
    data = json.dumps(record, separators=(",", ":")).encode()
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@dataclasses.dataclass(frozen=True)
class SandboxStartup:
    """What the supervisor needs about one sandboxed worker."""

    worker_pid: int  # host pid running user code: watch its CPU clock, SIGKILL it
    monitor_pid: int | None  # the process that called enter() (reaps the worker), if it forked
    applied: AppliedLayers
    cgroups: tuple[str, ...]


def _records(buffer: bytearray) -> list[dict[str, Any]]:
    records = []
    while len(buffer) >= _HEADER.size:
        (length,) = _HEADER.unpack_from(buffer)
        if length > MAX_RECORD:
            raise SandboxError("report", f"record of {length} bytes exceeds {MAX_RECORD}")
        if len(buffer) < _HEADER.size + length:
            break
        payload = bytes(buffer[_HEADER.size : _HEADER.size + length])
        del buffer[: _HEADER.size + length]
        record = json.loads(payload)
        if not isinstance(record, dict):
            raise SandboxError("report", "a record is not a JSON object")
        records.append(record)
    return records


def read_startup(fd: int, timeout_s: float = 10.0) -> SandboxStartup:
    """Read the report from ``fd`` (the read end the caller kept) until ready or failure.

    Raises ``SandboxError`` (with the failing ``stage``) on a failure record, on EOF before
    ready (the process died), or after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    buffer = bytearray()
    pids: dict[str, Any] | None = None
    ready: dict[str, Any] | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxError("startup", f"no ready report within {timeout_s:.1f} s")
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue
        chunk = os.read(fd, 65536)
        buffer += chunk
        for record in _records(buffer):
            kind = record.get("type")
            if kind == "pids":
                pids = record
            elif kind == "failed":
                raise SandboxError(str(record.get("stage")), str(record.get("error")))
            elif kind == "ready":
                ready = record
            if pids is not None and ready is not None:  # the two writers race: any order
                return SandboxStartup(
                    worker_pid=int(pids["worker_pid"]),
                    monitor_pid=pids.get("monitor_pid"),
                    applied=AppliedLayers.from_dict(ready["applied"]),
                    cgroups=tuple(pids.get("cgroups", ())),
                )
        if not chunk:
            raise SandboxError("startup", "the worker exited before it was sandboxed")


def cpu_clock_id(pid: int) -> int:
    """The clock id of a process's CPU-time clock (all its threads; not its children).

    ``time.clock_gettime(cpu_clock_id(startup.worker_pid))`` costs ~1 µs (isolation.md §3).
    """
    return ((~pid) << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)


def cpu_seconds(pid: int) -> float:
    return time.clock_gettime(cpu_clock_id(pid))


def kill_worker(startup: SandboxStartup) -> None:
    """SIGKILL the worker (pid 1 of its namespace: every descendant dies with it). The monitor
    then reaps it, removes its cgroups and exits; the caller of fork() reaps the monitor."""
    try:
        os.kill(startup.worker_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
