"""The isolate process: speak the protocol, load the worker, run its events concurrently.

Lifecycle (every step before user code is ember's, so Hello can be trusted):

    Hello(pid) -> wait for Init(spec) -> build env -> import main module -> Ready | LoadError
    then: Request/Scheduled -> one task each; Cancel -> cancel it; Call* -> binding replies

The supervisor watches this process's CPU clock and memory; each request's own CPU is metered
here (``cpumeter.py``). When the supervisor cannot rule out that a request is past its CPU time
it sends SIGXCPU: if the running request is over, ``CpuLimitInterrupt`` is raised into its code,
that request fails with kind "cpu", and the others carry on (the supervisor then replaces this
isolate). Code that catches the interrupt still ends with the limit error (the request's scope
keeps it); code that keeps running is killed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from ember.bindings.base import BindingSpec, import_target
from ember.bindings.env import Env, MissingNameHints
from ember.errors import HandlerError, ProtocolError
from ember.python_project import Requirement
from ember.runtime import loop as event_loop
from ember.runtime.codec import FastDecoder
from ember.runtime.frames import FrameDecoder, FrameWriter
from ember.runtime.isolate import handlers, httpclients, loader
from ember.runtime.isolate.blocking import BlockingCalls
from ember.runtime.isolate.channel import IsolateChannel
from ember.runtime.isolate.console import Console, ConsoleOut, ConsoleStream
from ember.runtime.isolate.cpumeter import CpuMeter
from ember.runtime.isolate.events import EventRunner
from ember.runtime.isolate.missing_module import compiled_extension_hint, missing_module_hint
from ember.runtime.isolate.socket_writer import SocketWriter
from ember.runtime.isolate.syntax_note import syntax_hint
from ember.runtime.isolate.tracebacks import format_user_traceback, user_message
from ember.runtime.mux import Mux
from ember.runtime.protocol import (
    PROTOCOL_VERSION,
    TO_ISOLATE,
    Abort,
    CallError,
    CallResult,
    Cancel,
    Credit,
    Data,
    End,
    Hello,
    Init,
    LoadError,
    Message,
    Ready,
    Request,
    Scheduled,
)

CONSOLE_BACKLOG_BYTES = 1 << 20  # console frames the isolate holds before a print waits
ISOLATE_PATH = str(Path(__file__).resolve().parent.parent / "isolate_path")


class IsolateConnection(asyncio.Protocol):
    """This isolate's end of its socketpair."""

    def __init__(self, host_pid: int) -> None:
        self.host_pid = host_pid
        self.transport: asyncio.Transport | None = None
        self._fd = -1
        self.decoder = FrameDecoder()
        self._decode = FastDecoder(TO_ISOLATE).decode
        self._writer = FrameWriter()
        self.mux = Mux(self.send)
        self.channel = IsolateChannel(self.send, self.mux)
        self.init: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.runner: EventRunner | None = None

    def send(self, message: Message) -> None:
        """Write one frame (coalesced per loop iteration)."""
        self._writer.send(message)

    def send_console(self, message: Message) -> None:
        """A console line: as ``send``, but past ``CONSOLE_BACKLOG_BYTES`` not yet sent the
        caller waits until they are, as a print to a full pipe does. Code that prints in a loop
        without awaiting never lets the loop send them, and they would grow until the worker
        was killed for memory."""
        self._writer.send(message)
        backlog = self._writer.queued_bytes + self._socket.get_write_buffer_size()
        if backlog > CONSOLE_BACKLOG_BYTES and self.channel.blocking is not None:
            self.channel.blocking.flush()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._socket = SocketWriter(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        self._writer.transport = self._socket
        self._fd = transport.get_extra_info("socket").fileno()
        self.channel.blocking = BlockingCalls(self)
        self.send(Hello(self.host_pid, PROTOCOL_VERSION))

    # -- what BlockingCalls pumps while sync code holds the loop (blocking.Link) ------------

    def fileno(self) -> int:
        """The socket the transport reads and writes."""
        return self._fd

    def take_outgoing(self) -> bytes:
        """Every byte not yet written, in order: what the socket had no room for, then the
        frames queued since the last flush (both removed)."""
        return self._socket.take_pending() + self._writer.take()

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self.decoder.feed(data):
                self.dispatch(self._decode(payload))
        except ProtocolError:
            os._exit(75)  # the supervisor is trusted; a bad frame means something is badly wrong
        # The flush goes after the tasks this read started: the answers of handlers that do not
        # suspend (most) are written at the end of the next iteration, not of the one after.
        self._writer.arm()

    def dispatch(self, message: Message) -> None:
        """Route one frame from the supervisor."""
        runner = self.runner
        if isinstance(message, Request | Scheduled | Cancel):
            if runner is not None:
                runner.on_event(message)
        elif isinstance(message, CallResult):
            self.channel.on_result(message)
        elif isinstance(message, CallError):
            self.channel.on_error(message)
        elif isinstance(message, Data | End | Abort | Credit):
            self.mux.on_frame(message)
        elif isinstance(message, Init) and not self.init.done():
            self.init.set_result(message.spec)

    def connection_lost(self, exc: Exception | None) -> None:
        # The supervisor closed our socket (drained, replaced) or died: nothing left to do.
        os._exit(0)


async def serve(sock: socket.socket, host_pid: int, code_dir: str | None = None) -> None:
    """Run the isolate on ``sock`` until the supervisor closes it."""
    loop = asyncio.get_running_loop()
    _, connection = await loop.create_unix_connection(
        lambda: IsolateConnection(host_pid), sock=sock
    )
    spec = await connection.init
    if code_dir is not None:
        spec = {**spec, "code_dir": code_dir}
    console = ConsoleOut(connection.send_console, spec.get("console_chars_per_s"))
    sys.stdout = ConsoleStream(console, "log")
    sys.stderr = ConsoleStream(console, "error")
    meter = CpuMeter(float(spec.get("cpu_ms") or 1e9) / 1000, connection.send)
    meter.install(loop)
    signal.signal(signal.SIGXCPU, meter.on_signal)
    try:
        env = build_env(spec, connection, console)
        entry = load_main(spec)
    except BaseException as exc:  # noqa: BLE001 - any failure of user code at load time
        connection.send(_load_error(exc, spec))
        await connection.lost
        return
    connection.runner = EventRunner(
        entry, env, connection.send, connection.mux, connection.channel, meter, console
    )
    connection.send(Ready(entry.names))
    await connection.lost


def build_env(spec: dict[str, Any], connection: IsolateConnection, console: ConsoleOut) -> Env:
    """``env`` from the spec's vars, secrets and binding clients; wire ``workers``/``js``."""
    bindings = {}
    for wire in spec.get("bindings", []):
        binding = BindingSpec.from_wire(wire)
        bindings[binding.name] = import_target(binding.client)(binding, connection.channel)
    hints = MissingNameHints.from_wire(spec.get("env_hints"))
    env = Env(spec.get("vars", {}), spec.get("secrets", {}), bindings, hints)
    workers = importlib.import_module("workers")
    workers.env = env  # type: ignore[attr-defined]
    js = importlib.import_module("js")
    js.console = Console(console)  # type: ignore[attr-defined]
    return env


def load_main(spec: dict[str, Any]) -> handlers.Entrypoints:
    """Import the main module from its file and find its handlers."""
    code_dir = Path(spec["code_dir"])
    main_path = code_dir / spec["main"]
    for extra in (code_dir / "python_modules", main_path.parent):
        if extra.is_dir() and str(extra) not in sys.path:
            sys.path.insert(0, str(extra))
    os.chdir(code_dir)
    if not main_path.is_file():
        raise HandlerError(f"main module {spec['main']} does not exist in {code_dir}")
    source_dir = spec.get("source_dir")
    finder = loader.install(code_dir, Path(source_dir) if source_dir else None)
    # HTTP client libraries become subrequests, as on the platform; its finder goes first.
    httpclients.install()
    shown_as = finder.shown_as(str(main_path.resolve())) if source_dir else None
    module_spec = importlib.util.spec_from_file_location(
        main_path.stem,
        main_path,
        loader=loader.SourceOnlyLoader(main_path.stem, str(main_path), shown_as),
    )
    if module_spec is None or module_spec.loader is None:
        raise HandlerError(f"cannot load {main_path} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[main_path.stem] = module
    module_spec.loader.exec_module(module)
    return handlers.discover(module, spec["main"])


def _load_error(exc: BaseException, spec: dict[str, Any]) -> LoadError:
    if isinstance(exc, SyntaxError):
        kind = "syntax"
    elif isinstance(exc, HandlerError):
        return LoadError("no_handler", str(exc), "")
    else:
        kind = "exception"
    message = user_message(exc)
    traceback = format_user_traceback(exc)
    if isinstance(exc, SyntaxError):
        note = syntax_hint(exc, spec.get("requires_python"))
        message, traceback = _with_note(message, traceback, note)
    elif isinstance(exc, ModuleNotFoundError):
        requirements = [Requirement.from_wire(r) for r in spec.get("requirements") or ()]
        hint = missing_module_hint(exc, Path(str(spec.get("code_dir", "."))), requirements)
        message, traceback = _with_note(message, traceback, hint)
    elif isinstance(exc, ImportError):
        hint = compiled_extension_hint(exc, Path(str(spec.get("code_dir", "."))))
        message, traceback = _with_note(message, traceback, hint)
    return LoadError(kind, message[:60_000], traceback)


def _with_note(message: str, traceback: str, note: str) -> tuple[str, str]:
    """``note`` under the traceback, or under the message when there is no traceback: in one
    of them only, as the console prints both (the message, then the traceback)."""
    if not note:
        return message, traceback
    if traceback.strip():
        return message, f"{traceback.rstrip()}\n\n{note}\n"
    return f"{message}\n\n{note}", traceback


def run(sock_fd: int, host_pid: int, code_dir: str | None = None) -> None:
    """Entry point in the forked child: serve until the supervisor closes the socket.

    ``code_dir``: where the deployment's code is from inside a sandbox (``/app``); it overrides
    the Init frame's, which names the directory as the supervisor sees it.
    """
    sock = socket.socket(fileno=sock_fd)
    sock.setblocking(False)
    if ISOLATE_PATH not in sys.path:
        sys.path.insert(0, ISOLATE_PATH)
    event_loop.run(serve(sock, host_pid, code_dir))
