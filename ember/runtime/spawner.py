"""Supervisor side of the zygote: start it, ask it for isolates, hear when they exit.

``spawn`` creates a fresh socketpair per isolate, writes the child's ``ChildSpec`` on it (the
first frame the child reads, after the fork), then hands the other end to the zygote
(SCM_RIGHTS) with an opaque request: the zygote never sees a deployment's vars, id, paths or
sandbox plan, since every isolate it forks later would inherit them from its heap. For a
sandboxed child the spawner also makes the startup-report pipe, passes its write end along and
reads the report itself (``SpawnedChild.startup``). The zygote answers with the child's pid.
``probe`` asks the zygote to probe the sandbox's layers; ``kill_uid`` to kill whatever still
runs as a pool uid. The zygote is restarted on demand if it died. It must be started from a
thread that outlives it (the event loop's), because its PDEATHSIG fires when the starting thread
exits.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

import ember
from ember.errors import WorkerCrashed
from ember.runtime.child import DEFAULT_PREPARE, ChildSpec, spec_frame

EMBER_ROOT = str(Path(ember.__file__).resolve().parent.parent)
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from ember.runtime.zygote import main; main(int(sys.argv[2]), sys.argv[3], sys.argv[4])"
)
SPAWN_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
MAX_REPORT = 16 * 1024  # a sandbox startup report is well under 2 KiB


@dataclass(frozen=True, slots=True)
class SpawnerConfig:
    """How isolates are made: the child hook, the interpreter, the zygote's environment."""

    prepare_child: str = DEFAULT_PREPARE
    # "module:function" targets the zygote calls once before forking anything (e.g. the
    # sandbox's preload, so that no sandboxed child pays for loading libseccomp).
    preload: tuple[str, ...] = ()
    python: str = sys.executable
    env: dict[str, str] = field(
        default_factory=lambda: {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    )


@dataclass(frozen=True, slots=True)
class SpawnedChild:
    """A new isolate process: the zygote's child pid and the supervisor's socket end.

    ``startup``: for a sandboxed child, resolves to the raw startup report (see
    ``ember.runtime.sandbox.report``) once the sandbox is set up or has failed; else None.
    """

    pid: int
    sock: socket.socket
    startup: asyncio.Future[bytes] | None = None


@dataclass(slots=True)
class _Report:
    """One sandboxed child's startup-report pipe, read until every writer has closed it."""

    fd: int
    future: asyncio.Future[bytes]
    data: bytearray = field(default_factory=bytearray)


class Spawner:
    """One zygote process and the isolates it forks."""

    def __init__(self, config: SpawnerConfig | None = None) -> None:
        self.config = config or SpawnerConfig()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._pending: dict[int, asyncio.Future[int]] = {}
        self._reports: dict[int, _Report] = {}  # by spawn id
        self._requests: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._lock = asyncio.Lock()
        self.on_exit: Callable[[int, int], None] | None = None

    @property
    def zygote_pid(self) -> int | None:
        """The zygote's pid while it runs."""
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Start the zygote (idempotent)."""
        if self._process is not None and self._process.poll() is None:
            return
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [
                self.config.python,
                "-I",
                "-c",
                _BOOTSTRAP,
                EMBER_ROOT,
                str(child.fileno()),
                self.config.prepare_child,
                ",".join(self.config.preload),
            ],
            pass_fds=[child.fileno()],
            env=self.config.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            close_fds=True,
        )
        child.close()
        parent.setblocking(False)
        self._control = parent
        asyncio.get_running_loop().add_reader(parent.fileno(), self._on_readable)

    async def spawn(self, spec: ChildSpec) -> SpawnedChild:
        """Fork one isolate for ``spec`` (its ``ipc_fd`` and ``report_fd`` are the child's)."""
        try:
            frame = spec_frame(spec)
        except Exception as exc:  # noqa: BLE001 - name what was wrong, never a msgpack trace
            raise WorkerCrashed(f"bad spawn spec: {type(exc).__name__}: {exc}") from None
        loop = asyncio.get_running_loop()
        async with self._lock:
            if self._control is None or self._process is None or self._process.poll() is not None:
                await self._restart()
            assert self._control is not None  # invariant: _restart sets it
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ours.setblocking(False)
            # The spec waits in the socket for the child; what does not fit in its buffer now
            # follows once the child is there to read it.
            sent = _send_some(ours, frame)
            self._next_id += 1
            spawn_id = self._next_id
            future: asyncio.Future[int] = loop.create_future()
            self._pending[spawn_id] = future
            fds = [theirs.fileno()]
            startup: asyncio.Future[bytes] | None = None
            report_w = -1
            if spec.sandbox:
                report_r, report_w = os.pipe()
                fds.append(report_w)
                startup = self._watch_report(spawn_id, report_r)
            try:
                socket.send_fds(
                    self._control, [msgpack.packb(["spawn", spawn_id], use_bin_type=True)], fds
                )
            except OSError as exc:
                self._pending.pop(spawn_id, None)
                self._end_report(spawn_id, None)
                ours.close()
                raise WorkerCrashed(f"the zygote is not accepting spawn requests: {exc}") from None
            finally:
                theirs.close()
                if report_w >= 0:
                    os.close(report_w)
        try:
            pid = await asyncio.wait_for(future, SPAWN_TIMEOUT_S)
            if sent < len(frame):
                try:
                    rest = memoryview(frame)[sent:]
                    await asyncio.wait_for(loop.sock_sendall(ours, rest), SPAWN_TIMEOUT_S)
                except OSError as exc:
                    raise WorkerCrashed(f"the isolate did not read its spawn spec: {exc}") from None
        except BaseException:
            self._end_report(spawn_id, None)
            ours.close()
            raise
        return SpawnedChild(pid=pid, sock=ours, startup=startup)

    async def probe(self, disabled: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The sandbox's layer report, probed in the zygote (``LayerReport.to_dict`` form)."""
        return await self._request("probe", sorted(disabled))  # type: ignore[no-any-return]

    async def kill_uid(self, uid: int) -> bool:
        """SIGKILL every process running as pool uid ``uid``; True if there was any."""
        return bool(await self._request("kill_uid", uid))

    async def _request(self, kind: str, argument: object) -> Any:
        async with self._lock:
            if self._control is None or self._process is None or self._process.poll() is not None:
                await self._restart()
            assert self._control is not None  # invariant: _restart sets it
            self._next_id += 1
            request_id = self._next_id
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._requests[request_id] = future
            try:
                self._control.send(msgpack.packb([kind, request_id, argument], use_bin_type=True))
            except OSError as exc:
                self._requests.pop(request_id, None)
                raise WorkerCrashed(f"the zygote is not accepting requests: {exc}") from None
        try:
            return await asyncio.wait_for(future, REQUEST_TIMEOUT_S)
        finally:
            self._requests.pop(request_id, None)

    async def _restart(self) -> None:
        await self.close()
        await self.start()

    def _watch_report(self, spawn_id: int, fd: int) -> asyncio.Future[bytes]:
        loop = asyncio.get_running_loop()
        os.set_blocking(fd, False)
        report = self._reports[spawn_id] = _Report(fd, loop.create_future())
        loop.add_reader(fd, self._read_report, spawn_id)
        return report.future

    def _read_report(self, spawn_id: int) -> None:
        report = self._reports.get(spawn_id)
        if report is None:
            return
        try:
            chunk = os.read(report.fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk and len(report.data) + len(chunk) <= MAX_REPORT:
            report.data += chunk
            return
        self._end_report(spawn_id, bytes(report.data))

    def _end_report(self, spawn_id: int, data: bytes | None) -> None:
        """Stop reading a report; resolve it with ``data`` (None: nobody awaits it)."""
        report = self._reports.pop(spawn_id, None)
        if report is None:
            return
        asyncio.get_running_loop().remove_reader(report.fd)
        os.close(report.fd)
        if data is not None and not report.future.done():
            report.future.set_result(data)

    def _on_readable(self) -> None:
        assert self._control is not None  # invariant: the reader is removed on close
        while True:
            try:
                data = self._control.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._zygote_lost()
                return
            message = msgpack.unpackb(data, raw=False)
            kind = message[0]
            if kind == "spawned":
                future = self._pending.pop(message[1], None)
                if future is not None and not future.done():
                    future.set_result(message[2])
            elif kind == "failed":
                self._end_report(message[1], None)
                future = self._pending.pop(message[1], None)
                if future is not None and not future.done():
                    future.set_exception(WorkerCrashed(f"zygote could not spawn: {message[2]}"))
            elif kind == "exited" and self.on_exit is not None:
                self.on_exit(message[1], message[2])
            elif kind in ("probed", "uid_killed", "error"):
                request = self._requests.get(message[1])
                if request is not None and not request.done():
                    if kind == "error":
                        request.set_exception(WorkerCrashed(f"zygote: {message[2]}"))
                    else:
                        request.set_result(message[2])

    def _zygote_lost(self) -> None:
        if self._control is not None:
            asyncio.get_running_loop().remove_reader(self._control.fileno())
            self._control.close()
            self._control = None
        for future in [*self._pending.values(), *self._requests.values()]:
            if not future.done():
                future.set_exception(WorkerCrashed("the zygote exited"))
        for spawn_id in list(self._reports):
            self._end_report(spawn_id, b"")  # no report: the sandboxed child dies with the zygote
        self._pending.clear()
        self._requests.clear()

    async def close(self) -> None:
        """Stop the zygote (its isolates die with it: PDEATHSIG)."""
        if self._control is not None:
            self._zygote_lost()
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            await asyncio.get_running_loop().run_in_executor(None, process.wait)


def _send_some(sock: socket.socket, data: bytes) -> int:
    """Write what fits now on a non-blocking socket; the count written."""
    try:
        return sock.send(data)
    except BlockingIOError:
        return 0


async def wait_reaped(pids: list[int], timeout_s: float = 2.0) -> None:
    """Wait (bounded) until the zygote reaped ``pids`` (sandbox monitors remove cgroups first)."""
    for _ in range(int(timeout_s / 0.01)):
        if not any(pid and os.path.exists(f"/proc/{pid}") for pid in pids):
            return
        await asyncio.sleep(0.01)
