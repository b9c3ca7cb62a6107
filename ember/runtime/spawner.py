"""Supervisor side of the zygote: start it, ask it for isolates, hear when they exit.

``spawn`` creates a fresh socketpair per isolate, hands one end to the zygote (SCM_RIGHTS) and
keeps the other; the zygote answers with the child's pid, and for a sandboxed child relays the
sandbox's startup report later (``SpawnedChild.startup``). ``probe`` asks the zygote to probe the
sandbox's layers; ``kill_uid`` to kill whatever still runs as a pool uid. The zygote is
restarted on demand if it died. It must be started from a thread that outlives it (the event
loop's), because its PDEATHSIG fires when the starting thread exits.
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
from ember.runtime.child import DEFAULT_PREPARE, ChildSpec

EMBER_ROOT = str(Path(ember.__file__).resolve().parent.parent)
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from ember.runtime.zygote import main; main(int(sys.argv[2]), sys.argv[3], sys.argv[4])"
)
SPAWN_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0


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


class Spawner:
    """One zygote process and the isolates it forks."""

    def __init__(self, config: SpawnerConfig | None = None) -> None:
        self.config = config or SpawnerConfig()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._pending: dict[int, asyncio.Future[int]] = {}
        self._reports: dict[int, asyncio.Future[bytes]] = {}
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
        """Fork one isolate for ``spec`` (its ``ipc_fd`` is filled in here)."""
        async with self._lock:
            if self._control is None or self._process is None or self._process.poll() is not None:
                await self._restart()
            assert self._control is not None  # invariant: _restart sets it
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._next_id += 1
            spawn_id = self._next_id
            loop = asyncio.get_running_loop()
            future: asyncio.Future[int] = loop.create_future()
            self._pending[spawn_id] = future
            startup: asyncio.Future[bytes] | None = None
            if spec.sandbox:
                startup = self._reports[spawn_id] = loop.create_future()
            wire = ChildSpec(
                spec.deployment_id,
                spec.code_dir,
                0,
                spec.env,
                spec.memory_bytes,
                spec.nofile,
                spec.sandbox,
            ).to_wire()
            try:
                socket.send_fds(
                    self._control,
                    [msgpack.packb(["spawn", spawn_id, wire], use_bin_type=True)],
                    [theirs.fileno()],
                )
            except OSError as exc:
                self._pending.pop(spawn_id, None)
                self._reports.pop(spawn_id, None)
                ours.close()
                raise WorkerCrashed(f"the zygote is not accepting spawn requests: {exc}") from None
            finally:
                theirs.close()
        try:
            pid = await asyncio.wait_for(future, SPAWN_TIMEOUT_S)
        except BaseException:
            self._reports.pop(spawn_id, None)
            ours.close()
            raise
        ours.setblocking(False)
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
                self._reports.pop(message[1], None)
                future = self._pending.pop(message[1], None)
                if future is not None and not future.done():
                    future.set_exception(WorkerCrashed(f"zygote could not spawn: {message[2]}"))
            elif kind == "exited" and self.on_exit is not None:
                self.on_exit(message[1], message[2])
            elif kind == "sandbox":
                report = self._reports.pop(message[1], None)
                if report is not None and not report.done():
                    report.set_result(message[2])
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
        for report in self._reports.values():
            if not report.done():
                report.set_result(b"")  # no report: the sandboxed child died with the zygote
        self._pending.clear()
        self._requests.clear()
        self._reports.clear()

    async def close(self) -> None:
        """Stop the zygote (its isolates die with it: PDEATHSIG)."""
        if self._control is not None:
            self._zygote_lost()
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            await asyncio.get_running_loop().run_in_executor(None, process.wait)


async def wait_reaped(pids: list[int], timeout_s: float = 2.0) -> None:
    """Wait (bounded) until the zygote reaped ``pids`` (sandbox monitors remove cgroups first)."""
    for _ in range(int(timeout_s / 0.01)):
        if not any(pid and os.path.exists(f"/proc/{pid}") for pid in pids):
            return
        await asyncio.sleep(0.01)
