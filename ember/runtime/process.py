"""One isolate process as the supervisor sees it: its socket, its requests, its lifecycle.

Every frame from the isolate is hostile (``protocol.decode`` validates it; anything wrong kills
the isolate and answers its requests with 502, never raising past the request boundary).
Its frames are routed by ``dispatch.py`` (mixed in). Limits are enforced from outside by
polling (``watchdog.py``, mixed in); past ``lifetime_cpu_s`` an isolate is replaced between
requests (before the sandbox's RLIMIT_CPU backstop). A sandboxed isolate's startup report
(relayed by the zygote) must name the pid that said Hello and exactly the layers asked for, or
the isolate is killed before any request.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

from ember.errors import BindingError, ProtocolError, WorkerCrashed
from ember.runtime import cpushare
from ember.runtime import limits as L
from ember.runtime.calls import CallRunner
from ember.runtime.codec import FastDecoder
from ember.runtime.console_gate import BACKSTOP, ConsoleGate
from ember.runtime.deployment import Deployment
from ember.runtime.dispatch import FrameDispatch
from ember.runtime.fields import (
    MAX_FRAME_BYTES,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_INLINE_BODY_BYTES,
    MAX_URL,
)
from ember.runtime.frames import FrameDecoder, FrameWriter
from ember.runtime.http import HttpRequest, HttpResponse
from ember.runtime.inflight import InFlight
from ember.runtime.lifecycle import State, WorkerLoadError
from ember.runtime.monitor import CpuClock
from ember.runtime.mux import Mux
from ember.runtime.pace import PollPace
from ember.runtime.protocol import FROM_ISOLATE, Init, Message, Request, Scheduled
from ember.runtime.sandbox.errors import SandboxError
from ember.runtime.sandbox.report import SandboxStartup, parse_startup
from ember.runtime.services import DeploymentServices
from ember.runtime.watchdog import POLL_INTERVAL_S, LimitWatch
from ember.runtime.worker_loops import loops_left

DRAIN_KILL_S = 2.0
MAX_UNREAD_BYTES = 64 * 1024 * 1024  # frames the isolate has not read; past this it is killed
SANDBOX_REPORT_WAIT_S = 2.0  # for the rest of the sandbox startup report after Hello


class IsolateProcess(FrameDispatch, LimitWatch, asyncio.Protocol):
    """The supervisor's end of one isolate."""

    def __init__(
        self,
        deployment: Deployment,
        services: DeploymentServices,
        hooks: Any,  # ProcessHooks (supervisor callbacks), see supervisor.py
        poll_interval: float = POLL_INTERVAL_S,
    ) -> None:
        self.deployment = deployment
        self.limits = deployment.limits
        self.services = services
        self.hooks = hooks
        self.poll_interval = poll_interval
        self._pace = PollPace(poll_interval)
        self.state = State.STARTING
        self.pid = self.spawn_pid = 0
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self._decode = FastDecoder(FROM_ISOLATE).decode
        self._writer = FrameWriter(MAX_UNREAD_BYTES, self._not_reading)
        self.mux = Mux(self.send)
        self.calls = CallRunner(
            deployment.id,
            self.send,
            self.mux,
            services.get,
            self.limits.max_concurrent_calls,
            lambda rid, level, message: hooks.note(self, level, message, self.inflight.get(rid)),
            lambda: hooks.call_refusal(self),
        )
        self.inflight: dict[int, InFlight] = {}
        # The console budget, enforced here too (``console_gate.py``): an isolate writing its
        # own frames is bounded by BACKSTOP times what its console lets through.
        budget = self.limits.console_chars_per_s
        self.console_gate = ConsoleGate(budget * BACKSTOP) if budget else None
        self.reads = 0  # reads of the isolate's frames (is it alive? cancelgrace.py)
        self.handlers: list[str] = []
        self._next_rid = 0
        self.loop = asyncio.get_running_loop()
        self._hello: asyncio.Future[None] = self.loop.create_future()
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._timer: asyncio.TimerHandle | None = None
        self._interrupt: tuple[int, float, float] | None = None  # (rid, cpu, wall) of SIGXCPU
        self._started = time.monotonic()
        self.last_active = self._started  # when a request last started or ended (idle eviction)
        self._cpu_base = 0.0
        self.clock = CpuClock()  # the isolate's CPU clock, once its pid is known
        self._idle_cpu = 0.0  # CPU when the last request ended (or at Ready)
        # The busy period's start and its finished requests' charges (cpushare.py).
        self._busy_base = 0.0
        self._busy_charged = 0.0
        self._fresh_cpu: float | None = None  # read by fit_for_request for the next request
        self.exit_reason: str | None = None
        self.sandbox: SandboxStartup | None = None  # what the sandbox applied, if sandboxed
        self._sandboxed = False

    # -- startup ------------------------------------------------------------------------------

    async def start(self, spawner: Any, child_spec: Any) -> None:
        """Spawn, handshake, load the module. Raises WorkerLoadError if it does not come up."""
        try:
            spawned = await spawner.spawn(child_spec)
        except (WorkerCrashed, OSError, TimeoutError) as exc:
            self.kill(L.UNAVAILABLE, f"spawn failed: {exc}", fail_ready=False)
            raise WorkerLoadError(
                L.UNAVAILABLE, f"could not start an isolate: {exc}", transient=True
            ) from None
        self.spawn_pid = spawned.pid
        self._sandboxed = spawned.startup is not None
        await self.loop.create_unix_connection(lambda: self, sock=spawned.sock)
        self._schedule_poll()
        # Pipelined: Init waits in the socket while the child finishes its own setup (the
        # socket is private to this isolate, whose code is still ember's until Init is read).
        init = self.deployment.init_spec()
        if spawned.startup is not None and "mount_ns" in child_spec.sandbox.get("layers", ()):
            init["code_dir"] = "/app"  # the host path is none of the worker's business
        try:
            self.send(Init(init))
        except BindingError:
            # Past the frame limit (a version stored before uploads were checked against it):
            # the same every time, so a load error that says why, not an unhandled exception.
            reason = (
                f"its bindings, variables and secrets do not fit the worker's Init frame (at "
                f"most {MAX_FRAME_BYTES:,} bytes); deploy a version with fewer or smaller ones"
            )
            self.kill(L.STARTUP_FAILED, reason, fail_ready=False)
            raise WorkerLoadError(L.STARTUP_FAILED, reason) from None
        try:
            await asyncio.wait_for(asyncio.shield(self._hello), self.limits.startup_wall_ms / 1000)
        except TimeoutError:
            self.kill(L.STARTUP_WALL_EXCEEDED, "no handshake")
        except WorkerLoadError:
            pass  # killed during the handshake; _ready carries the reason
        if spawned.startup is not None:
            await self._check_sandbox(spawned.startup, child_spec.sandbox)
        await self._ready

    async def _check_sandbox(self, report: asyncio.Future[bytes], asked: Any) -> None:
        """Verify the startup report; a sandbox failure is the load error (not "crashed")."""
        try:
            startup = parse_startup(await asyncio.wait_for(report, SANDBOX_REPORT_WAIT_S))
        except TimeoutError:
            self.kill(L.SANDBOX_FAILED, "no sandbox startup report")
            return
        except SandboxError as exc:
            self.kill(L.SANDBOX_FAILED, str(exc), fail_ready=False)
            raise WorkerLoadError(L.SANDBOX_FAILED, f"{L.SANDBOX_FAILED.message} {exc}") from None
        if self.state is State.DEAD:
            return
        layers = sorted(layer.value for layer in startup.applied.layers)
        if startup.worker_pid != self.pid or layers != sorted(asked.get("layers", ())):
            self.kill(L.SANDBOX_FAILED, f"sandbox applied {layers}, not what was asked")
            return
        self.sandbox = startup

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._writer.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.state is State.DEAD:
            return
        self.clock.hold()  # the requests this read's frames finish share one CPU reading
        self.reads += 1
        try:
            for payload in self.decoder.feed(data):
                self._dispatch(self._decode(payload))
                if self.state is State.DEAD:
                    return
        except ProtocolError as exc:
            self.kill(L.PROTOCOL_VIOLATION, f"protocol violation: {exc}")
        finally:
            self.clock.release()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state is not State.DEAD:
            reason = (
                "exited during startup" if self.state is State.STARTING else "exited unexpectedly"
            )
            self.kill(L.CRASHED, reason)

    def send(self, message: Message) -> None:
        """Write one frame to the isolate (coalesced per loop iteration)."""
        self._writer.send(message)

    def _not_reading(self) -> None:
        self.kill(L.PROTOCOL_VIOLATION, "stopped reading its socket")

    # -- requests -----------------------------------------------------------------------------

    def _new_request(self, kind: str, method: str, url: str) -> InFlight:
        self._next_rid += 1
        cpu, self._fresh_cpu = self._fresh_cpu, None
        if cpu is None:
            cpu = self.cpu()
        if not self.inflight:  # a busy period begins
            self._busy_base, self._busy_charged = cpu, 0.0
        request = InFlight(self, self._next_rid, kind, method, url, cpu)
        self.inflight[request.rid] = request
        self.last_active = request.started
        if len(self.inflight) == 1 and self._timer is not None:  # back from the idle pace
            self._timer.cancel()
            self._schedule_poll()
        if self.hooks.tracing(self):
            request.trace = []
        return request

    async def fetch(self, http: HttpRequest) -> HttpResponse:
        """Run one fetch event; returns once the response head is known."""
        request = self.begin_fetch(http)
        try:
            return await request.head
        except asyncio.CancelledError:
            request.client_gone()
            raise

    def begin_fetch(self, http: HttpRequest) -> InFlight:
        """Send one fetch event; its response head arrives in ``head``.

        Whoever awaits ``head`` instead of ``fetch`` calls ``client_gone`` if cancelled.
        """
        request = self._new_request("fetch", http.method, http.url)
        request.headers = http.headers  # (its Accept header only matters for error pages)
        request.loops_left = loops_left(http.headers)
        request.root_path = http.root_path
        if request.loops_left < 0:  # a subrequest of the 16th nested invocation: 1019
            request.fail(L.LOOP_LIMIT)
            return request
        refusal = _unsendable(http)
        if refusal is not None:
            request.fail(refusal)
            return request
        inline = (
            http.body
            if isinstance(http.body, bytes) and len(http.body) <= MAX_INLINE_BODY_BYTES
            else None
        )
        sid = 0
        if http.body is not None and inline is None:
            out = self.mux.open_out()
            sid = out.sid
            request.pump_body(out, http.body)
        self.send(Request(request.rid, http.method, http.url, http.headers, inline, sid))
        return request

    async def scheduled(self, cron: str, scheduled_time: float) -> InFlight:
        """Run one scheduled event; await ``request.finished`` for its outcome."""
        request = self._new_request("scheduled", "SCHEDULED", cron)
        request.scheduled_time = scheduled_time
        self.send(Scheduled(request.rid, cron, scheduled_time))
        return request

    def request_finished(self, request: InFlight, cpu: float) -> None:
        """Called by InFlight once it is over (Done, failure, or cancellation); ``cpu`` now."""
        gate = self.console_gate
        if gate is not None and gate.tally:  # lines dropped here: in its log before it is over
            self._console_dropped(gate.take(request.rid))
        if request.rid in self.inflight:
            limit = self.limits.cpu_ms / 1000
            sharing = len(self.inflight)
            unclaimed = cpushare.uncounted(
                cpu - self._busy_base, self._busy_charged, self.inflight.values(), limit
            )
            del self.inflight[request.rid]
            self._busy_charged += cpushare.charge(request, limit, unclaimed, sharing)
        self.last_active = time.monotonic()
        self.calls.cancel_request(request.rid)
        if request.trace is not None:  # a traced invocation is reported whole
            self.hooks.request_done(self, request)
        if self.inflight:
            return
        self._idle_cpu = cpu
        if self.state is State.DRAINING:
            self.close()
        elif self._idle_cpu - self._cpu_base > self.limits.lifetime_cpu_s:
            self.hooks.recycle(self, "used its lifetime CPU budget")

    # -- ending -------------------------------------------------------------------------------

    def drain(self) -> None:
        """Take no new requests; close once the in-flight ones finish."""
        if self.state in (State.READY, State.STARTING):
            self.state = State.DRAINING
            if not self.inflight:
                self.close()

    def close(self) -> None:
        """Close the socket of a drained isolate (it exits); kill it if it lingers."""
        if self.state is State.DEAD:
            return
        self.state = State.DEAD
        self.exit_reason = "drained"
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.close()
        self.calls.close()
        self.mux.close("isolate closed")
        self.loop.call_later(DRAIN_KILL_S, self._signal, signal.SIGKILL)
        self.hooks.dead(self, None, "drained")

    def kill(self, error: L.PlatformError, reason: str, fail_ready: bool = True) -> None:
        """Kill the isolate now; its requests get ``error``."""
        if self.state is State.DEAD:
            return
        self.state = State.DEAD
        self.exit_reason = reason
        self._signal(signal.SIGKILL)
        # A sandbox monitor reaps its worker and removes its cgroups: kill it only if the
        # worker is unknown (its PDEATHSIG then takes the worker along).
        if self.spawn_pid and self.spawn_pid != self.pid and not (self.pid and self._sandboxed):
            try:
                os.kill(self.spawn_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.close()
        if fail_ready and not self._ready.done():
            self._ready.set_exception(WorkerLoadError(error, f"{error.message} ({reason})"))
            self._ready.exception()  # mark retrieved: a killed isolate may have no waiter
        if not self._hello.done():
            self._hello.set_exception(WorkerLoadError(error, reason))
            self._hello.exception()  # mark retrieved: nobody may be waiting any more
        self.calls.close()
        self.mux.close(error.message)
        for request in list(self.inflight.values()):
            request.fail(error)
        self.hooks.dead(self, error, reason)

    @property
    def accepting(self) -> bool:
        """True while new requests may be sent here."""
        return self.state is State.READY


def _unsendable(http: HttpRequest) -> L.PlatformError | None:
    """What refuses a request the isolate protocol's bounds cannot carry (``fields.py``): its
    decoder would take the frame for a broken isolate's, and the isolate would exit."""
    if len(http.url) > MAX_URL:
        return L.URL_TOO_LONG
    headers = http.headers
    if len(headers) > MAX_HEADERS or sum(len(n) + len(v) for n, v in headers) > MAX_HEADER_BYTES:
        return L.REQUEST_HEADERS_TOO_LARGE
    return None
