"""One replica: its state, health checks, and restart after a crash.

A launched replica runs ``_supervise``: start the process, probe ``/health`` until it answers 200
(an ember server answers 503 while it loads), serve, and when the process exits or stops
answering (``unhealthy_after`` failed probes in a row) fail its in-flight requests at once,
kill what is left of it and start it again after a backoff that doubles up to a cap. A replica
that never became ready ``MAX_FAILED_STARTS`` times in a row is ``FAILED`` (a bad ``args`` entry
or a missing checkpoint does not get better by retrying): requests then fail at once with its
``StartFailure`` (the reason, the server's own error line, the config key), and a request after
``retry_delay_s`` tries one more start; each failed round doubles that delay
(``start_failure.py``), so a broken configuration never turns into a restart loop. An attached
replica is only probed: it goes ``DEAD`` (failing its requests) and back to ``READY`` with its
health.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ember.models.pool import health
from ember.models.pool.config import PoolSettings, ReplicaConfig
from ember.models.pool.launch import LaunchCommand
from ember.models.pool.lease import Lease
from ember.models.pool.process import ReplicaProcess
from ember.models.pool.start_failure import StartFailure, retry_delay

MAX_FAILED_STARTS = 3
STARTUP_PROBE_S = 0.2
# A model server's log line at warning level or above ("[  12.3s] warning: ..."; state.note).
WARNING_LINE = re.compile(r"\] (warning|error|critical): ")
STABLE_AFTER_S = 60.0  # ready this long: the next crash restarts with the initial backoff


class State(enum.Enum):
    STOPPED = "stopped"  # not started yet, or stopped on purpose
    STARTING = "starting"
    READY = "ready"
    DEAD = "dead"  # crashed or unreachable; restarting (launched) or re-probing (attached)
    FAILED = "failed"  # never became ready, MAX_FAILED_STARTS times in a row


@dataclass
class ReplicaStatus:
    """What ``ember ai models`` shows of a replica."""

    index: int
    state: str
    url: str | None
    describe: str
    outstanding: int
    restarts: int
    pid: int | None
    last_error: str | None
    ready_seconds: float | None
    command: str | None = None
    served: dict = field(default_factory=dict)


class Replica:
    """See the module docstring. ``command`` is None for an attached replica."""

    def __init__(
        self,
        model_id: str,
        index: int,
        config: ReplicaConfig,
        command: Callable[[], LaunchCommand] | None,
        settings: PoolSettings,
        http: httpx.AsyncClient,
        on_change: Callable[[], None],
        progress: Callable[[str], None],
    ) -> None:
        self.model_id = model_id
        self.index = index
        self.config = config
        self._command = command
        self.settings = settings
        self._http = http
        self._on_change = on_change
        self._progress = progress
        self.state = State.STOPPED
        self.url: str | None = config.url
        self.served_name: str = config.served_model_name or model_id
        self.leases: set[Lease] = set()
        self.restarts = 0
        self.last_error: str | None = None
        self.failed_at = 0.0
        self.failed_rounds = 0  # FAILED this many times since it last became ready
        self.start_failure: StartFailure | None = None
        self._failed_starts = 0
        self._error_line: str | None = None
        self.process: ReplicaProcess | None = None
        self.last_command: LaunchCommand | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready_since: float | None = None
        self._load_started = 0.0
        self._stopping = False

    # -- what the admission layer reads --------------------------------------------------------

    @property
    def outstanding(self) -> int:
        """Sequences in flight (a request of ``n`` choices counts n)."""
        return sum(lease.weight for lease in self.leases)

    @property
    def has_room(self) -> bool:
        return self.fits(1)

    def fits(self, weight: int) -> bool:
        """Whether a request of ``weight`` sequences may start here now. One larger than all
        the slots starts alone, on an idle replica (its server queues the excess itself), so
        that it waits rather than never runs."""
        if self.state is not State.READY:
            return False
        return not self.leases or self.outstanding + weight <= self.config.slots

    @property
    def unreachable(self) -> bool:
        """An attached server that stopped answering: nothing here can restart it."""
        return self.state is State.DEAD and not self.config.launched

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def name(self) -> str:
        return f"{self.model_id} replica {self.index + 1}"

    @property
    def short_name(self) -> str:
        return f"replica {self.index + 1}"

    def lease(self, session: str | None, weight: int = 1) -> Lease:
        lease = Lease(self, session, weight=weight)
        self.leases.add(lease)
        return lease

    def _release(self, lease: Lease) -> None:
        self.leases.discard(lease)
        self._on_change()

    # -- life cycle ------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        """Start supervising (idempotent); a FAILED replica retries after the backoff cap."""
        if self._stopping:
            return
        if self.state is State.FAILED:
            if time.monotonic() - self.failed_at < self.retry_delay_s:
                return
            self.state = State.STOPPED
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._supervise())

    @property
    def retry_delay_s(self) -> float:
        """How long a FAILED replica waits for its next start (``start_failure.retry_delay``)."""
        return retry_delay(self.settings.max_restart_backoff_s, self.failed_rounds)

    async def stop(self, drain_timeout: float = 0.0) -> None:
        """Stop taking requests, wait up to ``drain_timeout`` for in-flight ones, then stop."""
        self._stopping = True
        if drain_timeout > 0 and self.leases:
            deadline = time.monotonic() + drain_timeout
            while self.leases and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        self._fail_leases(f"{self.short_name} was stopped")
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.process is not None:
            await self.process.stop()
            self.process = None
        self._set(State.STOPPED)

    def public(self, reason: str) -> str:
        """``reason`` without the server's output where ``operator_detail`` is off."""
        if self.settings.operator_detail:
            return reason
        return reason.split(" (last output: ", 1)[0]

    def _set(self, state: State) -> None:
        if state is not self.state:
            self.state = state
            self._ready_since = time.monotonic() if state is State.READY else None
            self._on_change()

    def _fail_leases(self, reason: str) -> None:
        for lease in list(self.leases):
            lease.fail(reason)

    # -- supervision -----------------------------------------------------------------------------

    async def _supervise(self) -> None:
        if self._command is None:
            await self._watch_attached()
            return
        try:
            await self._supervise_launched()
        except Exception as exc:  # noqa: BLE001 - a bug here must fail requests, not hang them
            self._progress(f"{self.name}: supervision failed: {exc!r}")
            self._give_up(f"could not be supervised: {exc}")

    async def _supervise_launched(self) -> None:
        backoff = self.settings.restart_backoff_s
        # A round after FAILED gets one start: the configuration that failed is still there.
        allowed = 1 if self.failed_rounds else MAX_FAILED_STARTS
        round_starts = 0
        while not self._stopping:
            became_ready, reason = await self._run_once()
            if self._stopping:
                return
            self.last_error = reason
            self._fail_leases(f"{self.short_name} {self.public(reason)}")
            if became_ready:
                self._failed_starts = round_starts = self.failed_rounds = 0
                self.start_failure = None
            else:
                self._failed_starts += 1
                round_starts += 1
                if round_starts >= allowed:
                    self._give_up(reason)
                    return
            self._set(State.DEAD)
            self.restarts += 1
            self._progress(f"{self.name} {reason}; restarting in {backoff:g} s")
            await asyncio.sleep(backoff)
            stable = became_ready and self._uptime() >= STABLE_AFTER_S
            backoff = (
                self.settings.restart_backoff_s
                if stable
                else min(backoff * 2, self.settings.max_restart_backoff_s)
            )

    def _give_up(self, reason: str) -> None:
        """FAILED: keep why (without the output tail ``reason`` carries) until the next try."""
        self.failed_at = time.monotonic()
        self.failed_rounds += 1
        self.start_failure = StartFailure(
            reason=reason.split(" (last output: ", 1)[0],
            error_line=self._error_line,
            attempts=self._failed_starts,
            retry_in_s=self.retry_delay_s,
        )
        self._progress(f"{self.name} failed to start {self._failed_starts} times: {reason}")
        self._set(State.FAILED)

    def _uptime(self) -> float:
        return time.monotonic() - self._load_started

    async def _run_once(self) -> tuple[bool, str]:
        """Launch, wait until healthy, serve until it exits or hangs: (was ready, why it ended)."""
        assert self._command is not None  # invariant: launched replicas only
        self._set(State.STARTING)
        try:
            command = self._command()
        except Exception as exc:  # noqa: BLE001 - any failure to build it is a failed start
            self._error_line = None
            return False, f"could not build its command: {exc}"
        self.last_command = command
        self.url = command.url
        self._load_started = time.monotonic()
        self._progress(f"{self.name}: starting ({self.config.describe()})")
        process = ReplicaProcess(command, self._child_line)
        self.process = process
        self._error_line = None
        try:
            await process.start()
        except Exception as exc:  # noqa: BLE001 - OSError, or anything the spawn raises
            return False, f"could not start: {exc}"
        exited = asyncio.ensure_future(process.wait())
        hung: asyncio.Future[str] | None = None
        try:
            ready = await self._wait_ready(exited)
            if not ready:
                self._error_line = process.error_line()
                if exited.done():
                    return False, self._exit_reason(process, exited.result(), "while loading")
                return False, f"did not become ready in {self.settings.startup_timeout_s:g} s"
            self._set(State.READY)
            self._progress(f"{self.name}: ready in {self._uptime():.1f} s at {self.url}")
            hung = asyncio.ensure_future(self._watch_health())
            done, _ = await asyncio.wait({exited, hung}, return_when=asyncio.FIRST_COMPLETED)
            if exited in done:
                return True, self._exit_reason(process, exited.result(), "while serving")
            return True, f"stopped answering health checks ({hung.result()})"
        finally:
            # Whatever ended this run, nothing of it may linger (a hung server is killed here).
            if hung is not None:
                hung.cancel()
            if not exited.done():
                await process.stop(grace=1.0)
            exited.cancel()
            with contextlib.suppress(BaseException):
                await exited

    def _child_line(self, line: str) -> None:
        # While loading, every line is progress; once serving, only warnings and errors (a
        # dropped call to an undeclared tool, an ignored field): the rest is the replica's own.
        if self.state is State.STARTING or WARNING_LINE.search(line):
            self._progress(f"{self.name}: {line.removeprefix('ember models serve: ')}")

    def _exit_reason(self, process: ReplicaProcess, code: int, when: str) -> str:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        words = process.last_words(2)[-300:]
        return f"{how} {when}" + (f" (last output: {words})" if words else "")

    async def _wait_ready(self, exited: asyncio.Future[int]) -> bool:
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while time.monotonic() < deadline and not exited.done():
            if await self._probe() is None:
                await self._learn_served_name()
                return True
            await asyncio.wait({exited}, timeout=STARTUP_PROBE_S)
        return False

    async def _watch_health(self) -> str:
        """Returns (with the last problem) after ``unhealthy_after`` failed probes in a row."""
        return await health.until_unhealthy(
            self._probe, self.settings.health_interval_s, self.settings.unhealthy_after
        )

    async def _watch_attached(self) -> None:
        """Attached: READY while healthy; DEAD after ``unhealthy_after`` failed probes in a row,
        from the start too (its requests fail, new ones at once, as SGLang's router answers 503
        with no healthy worker, never after queue_timeout_s). Each change is a log line."""
        self._set(State.STARTING)
        self._load_started = time.monotonic()
        failures = 0
        while not self._stopping:
            problem = await self._probe()
            if problem is None:
                failures = 0
                if self.state is not State.READY:
                    again = " again" if self.state is State.DEAD else ""
                    await self._learn_served_name()
                    self.last_error = None
                    self._set(State.READY)
                    self._progress(f"{self.name}: attached {self.url} is ready{again}")
            else:
                failures += 1
                self.last_error = problem
                if self.state is not State.DEAD and failures >= self.settings.unhealthy_after:
                    if self.state is State.READY:
                        self.restarts += 1
                    where = f" at {self.url}" if self.settings.operator_detail else ""
                    self._fail_leases(f"{self.short_name}{where} is unreachable ({problem})")
                    self._set(State.DEAD)
                    self._progress(
                        f"{self.name}: attached {self.url} is unreachable ({problem}); its "
                        "requests fail until /health answers 200"
                    )
            await asyncio.sleep(self.settings.health_interval_s)

    async def _probe(self) -> str | None:
        """None when ``/health`` answers 200, else what went wrong."""
        return await health.probe(self._http, self.url, self.settings.health_timeout_s)

    async def _learn_served_name(self) -> None:
        """An attached server may serve the model under another name: ask it."""
        if self.config.served_model_name is not None or self._command is not None:
            return
        name = await health.served_name(self._http, self.url, self.settings.health_timeout_s)
        if name is not None and name != self.served_name:
            # SGLang names a model by its path unless told otherwise, so another name is common;
            # but a URL that serves some other model answers under this id: say so, once.
            self._progress(
                f"{self.name}: warning: {self.url} serves '{name}', not '{self.model_id}'; "
                f"requests for {self.model_id} go to it as '{name}' (if that is another model, "
                f"fix the url; if it is this one, set served_model_name: {name})"
            )
            self.served_name = name

    def status(self) -> ReplicaStatus:
        ready = time.monotonic() - self._ready_since if self._ready_since is not None else None
        command = self.last_command.shell() if self.last_command is not None else None
        return ReplicaStatus(
            index=self.index,
            state=self.state.value,
            url=self.url,
            describe=self.config.describe(),
            outstanding=self.outstanding,
            restarts=self.restarts,
            pid=self.process.pid if self.process is not None else None,
            last_error=self.last_error,
            ready_seconds=ready,
            command=command,
        )
