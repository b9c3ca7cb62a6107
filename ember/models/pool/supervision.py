"""A replica's supervision: the states it goes through and the loop that moves it through them.

A launched replica runs ``_supervise``: start the process, probe ``/health`` until it answers 200
(an ember server answers 503 while it loads; one that does not answer ``unhealthy_after`` probes
in a row, or is stopped, is hung: a failed start), serve, and when the process exits or fails
its health checks (``unhealthy_after`` failed probes in a row: no answer, or a 503 such as an
ember server's stalled engine) fail its in-flight requests at once,
kill what is left of it and start it again after a backoff that doubles up to a cap. A replica
that never became ready ``MAX_FAILED_STARTS`` times in a row is ``FAILED`` (a bad ``args`` entry
or a missing checkpoint does not get better by retrying): requests then fail at once with its
``StartFailure`` (the reason, the server's own error line, the config key), and a request after
``retry_delay_s`` tries one more start; each failed round doubles that delay
(``start_failure.py``), so a broken configuration never turns into a restart loop. Its requests
do not wait for the whole round either: each failed start is its ``StartFailure`` at once
(``retrying``), which a model with no ready replica answers with. Once the pool is shutting
down (``last_run``) a replica serves while it lives and is never started again. An attached
replica is only probed: it goes ``DEAD`` (failing its requests) and back to ``READY`` with its
health.

Apart from ``replica.py`` (what the admission layer reads: leases, room, status) because this is
the replica's own background task. ``ReplicaSupervision`` is a mixin of ``Replica`` (like the
runtime's ``watchdog.LimitWatch`` of ``IsolateProcess``): it works on the replica's fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from ember.models.pool import health
from ember.models.pool.config import PoolSettings, ReplicaConfig
from ember.models.pool.launch import LaunchCommand
from ember.models.pool.process import ReplicaProcess
from ember.models.pool.start_failure import StartFailure

MAX_FAILED_STARTS = 3
STARTUP_PROBE_S = 0.2
# A model server's log line at warning level or above ("[  12.3s] warning: ..."; state.note).
WARNING_LINE = re.compile(r"\] (warning|error|critical): ")
STABLE_AFTER_S = 60.0  # ready this long: the next crash restarts with the initial backoff


class State(enum.Enum):
    """Where a replica is in its life cycle."""

    STOPPED = "stopped"  # not started yet, or stopped on purpose
    STARTING = "starting"
    READY = "ready"
    DEAD = "dead"  # crashed or unreachable; restarting (launched) or re-probing (attached)
    FAILED = "failed"  # never became ready, MAX_FAILED_STARTS times in a row


class ReplicaSupervision:
    """Starts, watches and restarts one replica (launched), or probes it (attached)."""

    # Set by Replica.__init__; read and updated here.
    model_id: str
    config: ReplicaConfig
    settings: PoolSettings
    state: State
    url: str | None
    served_name: str
    restarts: int
    last_error: str | None
    failed_at: float
    failed_rounds: int
    start_failure: StartFailure | None
    process: ReplicaProcess | None
    last_command: LaunchCommand | None
    _command: Callable[[], LaunchCommand] | None
    _http: httpx.AsyncClient
    _progress: Callable[[str], None]
    _failed_starts: int
    _error_line: str | None
    _load_started: float
    _stopping: bool
    _last_run: bool

    if TYPE_CHECKING:  # defined by Replica

        @property
        def name(self) -> str: ...

        @property
        def short_name(self) -> str: ...

        @property
        def retry_delay_s(self) -> float: ...

        def public(self, reason: str) -> str: ...

        def _set(self, state: State) -> None: ...

        def _fail_leases(self, reason: str) -> None: ...

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
        while not self._stopping and not self._last_run:
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
                # Its requests hear of it now, not after the round (``start_failure.py``).
                self.start_failure = self._failure(reason, backoff, of=allowed)
            if self._last_run:  # the pool is shutting down: nothing is started again
                self._progress(f"{self.name} {reason}; not restarted: the pool is shutting down")
                self._set(State.DEAD)
                return
            self._set(State.DEAD)
            self.restarts += 1
            if became_ready:
                self._progress(f"{self.name} {reason}; restarting in {backoff:g} s")
            else:  # the operator's log says what the requests' 3043 says: attempt k of n
                self._progress(
                    f"{self.name} failed to start (attempt {round_starts} of {allowed}): "
                    f"{reason}; retrying in {backoff:g} s"
                )
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
        self.start_failure = self._failure(reason, self.retry_delay_s)
        self._progress(f"{self.name} failed to start {self._failed_starts} times: {reason}")
        self._set(State.FAILED)

    def _failure(self, reason: str, retry_in_s: float, of: int | None = None) -> StartFailure:
        """The latest failed start (without the output tail ``reason`` carries)."""
        return StartFailure(
            reason=reason.split(" (last output: ", 1)[0],
            error_line=self._error_line,
            attempts=self._failed_starts,
            retry_in_s=retry_in_s,
            of=of,
            at=time.monotonic(),
        )

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
            not_ready = await self._wait_ready(process, exited)
            if not_ready is not None:
                self._error_line = process.error_line()
                if exited.done():
                    return False, self._exit_reason(process, exited.result(), "while loading")
                return False, not_ready
            self._set(State.READY)
            self._progress(f"{self.name}: ready in {self._uptime():.1f} s at {self.url}")
            hung = asyncio.ensure_future(self._watch_health())
            done, _ = await asyncio.wait({exited, hung}, return_when=asyncio.FIRST_COMPLETED)
            if exited in done:
                return True, self._exit_reason(process, exited.result(), "while serving")
            return True, f"failed its health checks ({hung.result()})"
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

    async def _wait_ready(self, process: ReplicaProcess, exited: asyncio.Future[int]) -> str | None:
        """None once healthy; else why not (it exited, it hung, or ``startup_timeout_s``).

        A loading server answers 503 (ember) or does not listen yet (still importing; SGLang
        until its weights are in): both are waited for. One that does not answer at all,
        ``unhealthy_after`` probes in a row (each timing out, or finding the process stopped),
        is hung: it will not load, and its requests must not wait ``startup_timeout_s`` for it.
        """
        settings = self.settings
        deadline = time.monotonic() + settings.startup_timeout_s
        silent = 0
        while time.monotonic() < deadline and not exited.done():
            seen = await health.check(self._http, self.url, settings.health_timeout_s, self._path)
            if seen.problem is None:
                await self._learn_served_name()
                return None
            if seen.timed_out or process.stopped():
                silent += 1
                if silent >= settings.unhealthy_after:
                    how = "is stopped" if process.stopped() else "does not answer"
                    return (
                        f"hung while loading: it {how} ({seen.problem}; {silent} probes in a row)"
                    )
            else:
                silent = 0
            await asyncio.wait({exited}, timeout=STARTUP_PROBE_S)
        return (
            "exited"
            if exited.done()
            else (f"did not become ready in {settings.startup_timeout_s:g} s")
        )

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

    @property
    def _path(self) -> str:
        return health.health_path(self.config.backend)

    async def _probe(self) -> str | None:
        """None when the health check answers 200, else what went wrong."""
        return await health.probe(self._http, self.url, self.settings.health_timeout_s, self._path)

    async def _learn_served_name(self) -> None:
        """An attached server may serve the model under another name: ask it."""
        if self.config.served_model_name is not None or self._command is not None:
            return
        names = await health.served_names(self._http, self.url, self.settings.health_timeout_s)
        if self.served_name in names:  # among others (aliases, adapters): ask for this one
            return
        name = names[0] if names else None
        if name is not None:
            # SGLang names a model by its path unless told otherwise, so another name is common;
            # but a URL that serves some other model answers under this id: say so, once.
            self._progress(
                f"{self.name}: warning: {self.url} serves '{name}', not '{self.model_id}'; "
                f"requests for {self.model_id} go to it as '{name}' (if that is another model, "
                f"fix the url; if it is this one, set served_model_name: {name})"
            )
            self.served_name = name
