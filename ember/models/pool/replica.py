"""One replica as the pool sees it: its leases and room, its state, its status.

Its supervision (start, health checks, restart after a crash; the states it goes through) is
``supervision.py``, mixed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ember.models.pool.config import PoolSettings, ReplicaConfig
from ember.models.pool.launch import LaunchCommand
from ember.models.pool.lease import Lease
from ember.models.pool.outlier import Ejection, Outlier
from ember.models.pool.process import ReplicaProcess
from ember.models.pool.start_failure import StartFailure, retry_delay
from ember.models.pool.supervision import ReplicaSupervision, State


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
    ejected: bool = False  # out of rotation after failed requests (outlier.py)
    served: dict = field(default_factory=dict)

    @property
    def number(self) -> int:
        """How logs, errors and metrics name it: "replica 1" is the first (index 0)."""
        return self.index + 1


class Replica(ReplicaSupervision):
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
        self._last_run = False  # the pool is shutting down: never started again
        self.outlier = Outlier(
            Ejection(settings.eject_after, settings.eject_time_s, settings.max_eject_time_s)
        )
        self._probe_timer: asyncio.TimerHandle | None = None  # wakes the queue (outcome)

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
    def start_failing(self) -> bool:
        """Its latest start failed and none succeeded since: FAILED, or still retrying (its
        requests need not wait for the rest of the round: ``start_failure.py``)."""
        return self.start_failure is not None and self.state is not State.READY

    @property
    def retired(self) -> bool:
        """Not serving, and never started again: the pool is shutting down (``last_run``)."""
        return self._last_run and self.state in (State.STOPPED, State.DEAD, State.FAILED)

    @property
    def name(self) -> str:
        return f"{self.model_id} replica {self.index + 1}"

    @property
    def short_name(self) -> str:
        return f"replica {self.index + 1}"

    def lease(self, session: str | None, weight: int = 1) -> Lease:
        lease = Lease(self, session, weight=weight)
        self.leases.add(lease)
        self.outlier.leased(lease, time.monotonic())
        return lease

    def _release(self, lease: Lease) -> None:
        self.leases.discard(lease)
        self.outlier.released(lease)
        self._on_change()

    def outcome(self, lease: Lease, failure: str | None) -> None:
        """A request's outcome (``Lease.outcome``): may eject this replica or restore it."""
        if failure is None:
            if self.outlier.succeeded():
                self._progress(f"{self.name} answered its probe request: back in rotation")
                self._on_change()
            return
        seconds = self.outlier.failed(lease, time.monotonic())
        if seconds is not None:
            self._progress(
                f"{self.name} ejected for {seconds:g} s after failed requests "
                f"(last: {self.public(failure)}); then one probe request decides"
            )
            self._wake_at_probe_time()

    def _wake_at_probe_time(self) -> None:
        """When the ejection ends, tell the queue: a request waiting for a busy replica in
        rotation can be the probe here instead (nothing else changes at that moment, so
        without this it would wait for a slot elsewhere while this replica sits idle)."""
        if self._probe_timer is not None:
            self._probe_timer.cancel()
        until = self.outlier.until
        if until is None:
            return
        self._probe_timer = asyncio.get_running_loop().call_later(
            max(0.0, until - time.monotonic()), self._probe_time
        )

    def _probe_time(self) -> None:
        self._probe_timer = None
        until = self.outlier.until
        if until is not None and time.monotonic() < until:  # the loop's clock ran early
            self._wake_at_probe_time()
            return
        self._on_change()

    # -- life cycle ------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        """Start supervising (idempotent); a FAILED replica retries after the backoff cap."""
        if self._stopping or self._last_run:
            return
        if self.state is State.FAILED:
            if time.monotonic() - self.failed_at < self.retry_delay_s:
                return
            self.state = State.STOPPED
            # A new round: the request that starts it waits for its one start, whose own
            # failure (FAILED again) is what it then hears.
            self.start_failure = None
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._supervise())

    def last_run(self) -> None:
        """The pool is shutting down (``ember serve``'s HTTP drain): serve on while alive, but
        whatever ends this run, start nothing again; requests then fail at once (``retired``)."""
        self._last_run = True
        self._on_change()

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
        if self._probe_timer is not None:
            self._probe_timer.cancel()
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
            ejected=self.outlier.ejected,
        )
