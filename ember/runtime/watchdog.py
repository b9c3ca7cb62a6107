"""An isolate's limits, enforced from outside by polling (the limit half of ``process.py``).

Each request is charged its own CPU, as the isolate meters it, within a bound on the isolate's
total that the supervisor keeps from its own clock (``cpushare.py``). While a request may be
past its limit the isolate gets SIGXCPU, which raises into the running request's code if that
one is over (else the isolate reports its split). Past the bound, the request with the most CPU
is marked and interrupted: it ends over its CPU limit whatever its code answers afterwards
(``dispatch.py``). If the isolate neither reports a request failed nor ends the marked one
within a grace period it is killed: the marked request gets the CPU error, the others in the
isolate the reason they were stopped. Memory past
the limit kills the isolate at once. CPU used while no request is in flight (a thread left
burning) past ``idle_cpu_ms`` kills an idle isolate. Readings come from ``monitor.py``; the
polling pace from ``pace.py``.

``LimitWatch`` is a mixin of ``IsolateProcess`` (not a separate object) so that the per-request
``cpu()`` reading and the poll timer cost no extra indirection.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from ember.config_values import LIMIT_KEYS
from ember.runtime import cpushare
from ember.runtime import limits as L
from ember.runtime.lifecycle import State, WorkerLoadError
from ember.runtime.monitor import CpuClock, process_rss_bytes
from ember.runtime.pace import PollPace

POLL_INTERVAL_S = 0.01
IDLE_POLL_INTERVAL_S = 0.25
INTERRUPT_GRACE_CPU_S = cpushare.GRACE_CPU_S  # CPU an interrupted isolate may burn before a kill
INTERRUPT_GRACE_WALL_S = 2.0


class LimitWatch:
    """Polls one isolate's CPU and memory against its deployment's limits."""

    # Set by IsolateProcess.__init__ (and its handshake); read and updated here.
    state: State
    pid: int
    limits: L.Limits
    loop: asyncio.AbstractEventLoop
    poll_interval: float
    clock: CpuClock
    inflight: dict[int, Any]  # rid -> InFlight
    _pace: PollPace
    _timer: asyncio.TimerHandle | None
    _interrupt: tuple[int, float, float] | None
    _started: float
    _cpu_base: float
    _idle_cpu: float
    _busy_base: float
    _busy_charged: float
    _fresh_cpu: float | None
    _ready: asyncio.Future[None]

    if TYPE_CHECKING:  # defined by IsolateProcess

        def kill(self, error: L.PlatformError, reason: str, fail_ready: bool = True) -> None: ...

    def fit_for_request(self) -> bool:
        """True if a new request may go here; an idle isolate that burned CPU is killed first."""
        if self.state is State.READY and not self.inflight:
            # Each reading of the isolate's CPU clock is a syscall: the request that follows
            # at once (the supervisor calls fetch right after this) starts from this one.
            self._fresh_cpu = self.cpu()
            self._check_idle(self._fresh_cpu)
        return self.state is State.READY

    def cpu(self) -> float:
        """The isolate's CPU seconds (0 before Hello or after death)."""
        return self.clock.read()

    def _schedule_poll(self, delay: float | None = None) -> None:
        if self.state is not State.DEAD:
            self._timer = self.loop.call_later(delay or self.poll_interval, self._poll)

    def _poll(self) -> None:
        self._timer = None
        try:
            self._check_limits()
        finally:
            # An idle isolate only needs its idle-CPU check: poll it slowly, so a platform with
            # many idle deployments does not wake up 100 times a second for each of them; a
            # busy one that only waits (on a model) is polled less often too (pace.py).
            busy = self.state is State.STARTING or self.inflight
            self._schedule_poll(self._pace.after(self.cpu()) if busy else IDLE_POLL_INTERVAL_S)

    def _check_limits(self) -> None:
        if self.state is State.DEAD or not self.pid:
            return
        now = time.monotonic()
        cpu = self.cpu()
        if self.state is State.STARTING:
            if cpu - self._cpu_base > self.limits.startup_cpu_ms / 1000:
                used = math.ceil((cpu - self._cpu_base) * 1000)  # past the limit: never equal
                self._ready_fail(
                    L.STARTUP_CPU_EXCEEDED,
                    startup_cpu_detail(used, self.limits),
                    f"startup used {used:,} ms of CPU (limit {self.limits.startup_cpu_ms:,} ms)",
                )
            elif now - self._started > self.limits.startup_wall_ms / 1000:
                self._ready_fail(L.STARTUP_WALL_EXCEEDED)
            return
        if not self.inflight:
            self._check_idle(cpu)
            return
        try:
            rss = process_rss_bytes(self.pid) if self._pace.memory_due(cpu) else 0
        except OSError:
            rss = 0
        if rss > self.limits.memory_bytes:
            self.kill(L.MEMORY_EXCEEDED, f"resident memory {rss >> 20} MiB over the limit")
            return
        self._check_cpu(cpu, now)
        for request in list(self.inflight.values()):
            request.check_deadline(now)

    def _check_cpu(self, cpu: float, now: float) -> None:
        limit = self.limits.cpu_ms / 1000
        if self._interrupt is not None:
            rid, cpu_at, wall_at = self._interrupt
            request = self.inflight.get(rid)
            if request is None:
                self._interrupt = None
            elif cpu - cpu_at > INTERRUPT_GRACE_CPU_S or now - wall_at > INTERRUPT_GRACE_WALL_S:
                # Its own answer first: the others are stopped for its sake, not for a limit
                # of theirs (one isolate runs one event's code at a time, as a JS isolate does).
                request.fail(L.CPU_EXCEEDED)
                reason = f"request {rid} did not stop at its CPU limit"
                self.kill(L.isolate_restarted(rid, "did not stop at its CPU limit"), reason)
            else:
                # Again each poll: an honest isolate interrupts the marked request once its
                # own metering agrees (the isolate's overhead is charged to no request).
                self._signal(signal.SIGXCPU)
            return
        requests = self.inflight.values()
        budget = cpushare.budget(self._busy_charged, len(self.inflight), limit)
        if cpu - self._busy_base > budget:
            request = max(requests, key=lambda r: cpushare.possible(r, cpu))
            self._interrupt = (request.rid, cpu, now)
            request.cpu_exceeded = True
            self._signal(signal.SIGXCPU)
            return
        for request in requests:
            if cpushare.possible(request, cpu) > limit:
                self._signal(signal.SIGXCPU)  # interrupt it if it runs, else report the split
                return

    def _check_idle(self, cpu: float) -> None:
        if self.state is State.READY and cpu - self._idle_cpu > self.limits.idle_cpu_ms / 1000:
            used = (cpu - self._idle_cpu) * 1000
            self.kill(
                L.IDLE_CPU_EXCEEDED,
                f"used {used:.0f} ms of CPU with no request in flight (limit "
                f"{self.limits.idle_cpu_ms:g} ms: a thread or task left running after a response)",
            )

    def _ready_fail(
        self, error: L.PlatformError, detail: str | None = None, reason: str | None = None
    ) -> None:
        """Fail the start with ``detail`` (the error shown for it); ``reason``: the shorter
        line the isolate's stop is logged with (the detail is printed beside it)."""
        if not self._ready.done():
            self._ready.set_exception(WorkerLoadError(error, detail or error.message))
        self.kill(error, reason or error.message, fail_ready=False)

    def _signal(self, sig: int) -> None:
        if self.pid:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass


def startup_cpu_detail(used_ms: int, limits: L.Limits) -> str:
    """The startup CPU error with a way out: the platform's sentence (clients outside dev get
    only that), then what the module's top level used, the limit, and what raises it."""
    return (
        f"{L.STARTUP_CPU_EXCEEDED.message} The worker's top level had used {used_ms:,} ms of "
        f"CPU when it was stopped (limit {limits.startup_cpu_ms:,} ms). Move work out of import "
        f"time (into the handler, or cached on first use), or raise limits.startup_cpu_ms in "
        f"the project's config (ember.yaml, or wrangler.toml / wrangler.jsonc; at most "
        f"{LIMIT_KEYS['startup_cpu_ms'][1]:,})."
    )
