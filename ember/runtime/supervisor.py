"""The supervisor: deployments, their isolates, and the one entry point for their events.

Owns the zygote (``Spawner``), the shared binding resources, and one ``Slot`` per deployment:
its ``Deployment`` value, its binding services, its current isolate (started on first use or
eagerly), the load failure of its current version (sticky: no respawn storm), and retired
isolates still draining. The API is what ``ember dev`` and ``ember serve`` both use:

    supervisor = Supervisor(state_dir=..., sandbox=SandboxPolicy(default_profile=FULL))
    await supervisor.start()                     # zygote; sandbox probe unless dev-only
    supervisor.sandbox_status().lines()          # the startup report: layers on, and why not
    await supervisor.deploy(deployment, sandbox=ANONYMOUS)   # add, or replace: start new,
                                                 # switch, drain old; raises MinimumLayersMissing
    await supervisor.fetch(deployment_id, req)   # -> HttpResponse (errors are responses too)
    await supervisor.scheduled(deployment_id, cron)
    await supervisor.remove(deployment_id); await supervisor.close()
    await supervisor.stop(select, error, reason) # kill the picked deployments' isolates now
    supervisor.evict_idle(idle_s)                # stop isolates idle that long (lazy restart)
``max_isolates`` caps live isolates (``capacity.py``): LRU idle one stopped for a new one, or 503;
``deploy(..., pools=...)`` holds a deployment's isolates to shares of it (per account).
Slots and the turnover of their isolates live in ``slot.py`` (mixed in).

Each deployment runs under the sandbox profile given to ``deploy`` (default: the policy's
``default_profile``, DEV unless the operator says otherwise); see ``isolation.py``.
``tracing`` (a predicate on deployment ids, e.g. "a tail is connected") selects deployments whose
invocations are also reported whole, as ``InvocationEvent``s with their logs and exceptions.
``call_refusal`` (deployment id -> why its binding calls are refused, or None) is asked before
every binding call (``ember serve``: a temporary account past its expiry).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.bindings.registry import BindingRegistry, default_registry
from ember.runtime import events as E
from ember.runtime import limits as L
from ember.runtime.capacity import IsolateCap, IsolatePool, is_idle
from ember.runtime.child import child_environment
from ember.runtime.deployment import Deployment
from ember.runtime.errorpage import accept_of, dev_error_response, platform_error_response
from ember.runtime.hooks import SupervisorHooks
from ember.runtime.http import HttpRequest, HttpResponse
from ember.runtime.inflight import InFlight
from ember.runtime.isolation import Isolation, SandboxPolicy, SandboxStatus, is_dev
from ember.runtime.lifecycle import State, WorkerLoadError
from ember.runtime.process import IsolateProcess
from ember.runtime.sandbox import Profile, SandboxSpec
from ember.runtime.services import DeploymentServices, SharedResources
from ember.runtime.slot import Slot, SlotIsolates
from ember.runtime.spawner import Spawner, SpawnerConfig, wait_reaped
from ember.runtime.subrequest import NetworkPolicy, SubrequestService

NOT_FOUND = L.PlatformError(404, None, "No worker is deployed here.", "not_found")
PLATFORM_NETWORK = NetworkPolicy(allow_loopback=False, allow_private=False)
SANDBOX_PRELOAD = "ember.runtime.sandbox_hook:preload"  # run in the zygote when not dev-only


@dataclass(frozen=True, slots=True)
class ScheduledResult:
    """How a scheduled event went."""

    outcome: str  # "ok", "exception", or a platform error tag
    message: str = ""
    traceback: str = ""


class Supervisor(SlotIsolates):
    """Runs deployments in isolates; see the module docstring."""

    def __init__(
        self,
        *,
        state_dir: Path,
        events: E.EventSink | None = None,
        registry: BindingRegistry | None = None,
        spawner: SpawnerConfig | None = None,
        network: NetworkPolicy | None = None,
        dev: bool = False,
        clock: object = None,
        poll_interval: float = 0.01,
        sandbox: SandboxPolicy | None = None,
        max_isolates: int | None = None,
    ) -> None:
        self.events: E.EventSink = events or E.ListSink()
        self.registry = registry or default_registry()
        self.resources = SharedResources(state_dir, clock=clock or time.time)  # type: ignore[arg-type]
        policy = sandbox or SandboxPolicy()
        config = spawner or SpawnerConfig()
        if not is_dev(policy.default_profile) and not config.preload:
            config = dataclasses.replace(config, preload=(SANDBOX_PRELOAD,))
        self.spawner = Spawner(config)
        self.isolation = Isolation(policy, self.spawner)
        # A platform's workers reach no host of its own network through fetch() unless the
        # operator says so (the supervisor makes subrequests: SSRF to loopback and LAN).
        self.network = network or (
            NetworkPolicy() if is_dev(policy.default_profile) else PLATFORM_NETWORK
        )
        self.dev = dev
        self.poll_interval = poll_interval
        self.tracing: Callable[[str], bool] | None = None
        self.call_refusal: Callable[[str], str | None] | None = None
        self.cap = IsolateCap(max_isolates)
        self._slots: dict[str, Slot] = {}
        self._owner: dict[IsolateProcess, Slot] = {}
        self._closing = False

    async def start(self) -> None:
        """Start the zygote; probe the sandbox's layers unless only dev deployments run."""
        await self.spawner.start()
        await self.isolation.start()

    def sandbox_status(self) -> SandboxStatus:
        """The sandbox startup report: layers on this host, the policy, pool uids."""
        return self.isolation.status()

    async def close(self) -> None:
        """Kill every isolate, give back pool uids, close services and the zygote."""
        self._closing = True
        spawned = [p.spawn_pid for slot in self._slots.values() for p in slot.processes]
        for slot in list(self._slots.values()):
            await self._retire(slot, kill=True, error=L.STOPPING)
        self._slots.clear()
        await wait_reaped(spawned)  # sandbox monitors remove their cgroups before the zygote goes
        await self.isolation.close()
        await self.spawner.close()
        await self.resources.aclose()

    # -- deployments --------------------------------------------------------------------------

    async def deploy(
        self,
        deployment: Deployment,
        *,
        eager: bool = True,
        sandbox: Profile | None = None,
        pools: tuple[IsolatePool, ...] = (),
        cpu_nest: tuple[str, ...] = (),
    ) -> WorkerLoadError | None:
        """Add or replace a deployment. Eagerly: start its isolate before switching to it.

        ``sandbox``: the profile its isolates run under (``ember.runtime.sandbox`` DEV, FULL,
        ANONYMOUS); None means the policy's default. A profile this host cannot meet raises
        ``MinimumLayersMissing`` naming the missing layers, and the previous version (if any)
        stays live. Returns the load error if the new version failed to start (it is then
        live, answering with that error, as ``ember dev`` shows it; ``ember serve`` may roll
        back instead). ``pools``: the pools its isolates count in, each held to a share of
        ``max_isolates`` (``capacity.IsolatePool``: its account's, temporary accounts').
        ``cpu_nest``: the shared cpu cgroups its isolates go in, outermost first (where the
        sandbox has cgroups; ``ember serve``: the account's), so that contended CPU is shared
        between accounts, not between isolates.
        """
        profile = sandbox or self.isolation.policy.default_profile
        plan = await self.isolation.plan(
            deployment, profile, child_environment(deployment), cpu_nest=cpu_nest
        )
        slot = self._new_slot(deployment, profile, plan)
        slot.pools = pools
        error: WorkerLoadError | None = None
        if eager:
            try:
                await self._acquire(slot)
            except WorkerLoadError as exc:
                error = exc
        old = self._slots.get(deployment.id)
        self._slots[deployment.id] = slot
        if old is not None:
            await self._retire(old, kill=False)
        return error

    async def remove(self, deployment_id: str) -> None:
        """Stop a deployment: new requests get 404; in-flight ones finish first."""
        slot = self._slots.pop(deployment_id, None)
        if slot is not None:
            await self._retire(slot, kill=False)
            if not slot.processes:
                await self._release_uid(deployment_id)

    async def stop(self, select: Callable[[str], bool], error: L.PlatformError, reason: str) -> int:
        """Stop the deployments whose ids ``select`` picks, now: each is removed (new requests
        get 404) and every isolate of theirs is killed, those of replaced versions still
        draining included; requests in flight get ``error`` (a streamed body is cut), and no
        binding call of theirs runs past this point. ``reason``: the log's. Returns how many
        isolates were killed."""
        removed = [self._slots.pop(d) for d in [d for d in self._slots if select(d)]]
        doomed = [p for p, slot in self._owner.items() if select(slot.deployment.id)]
        for process in doomed:
            process.kill(error, reason)
        for slot in removed:
            await self._retire(slot, kill=True, error=error, reason=reason)
            if not slot.processes:
                await self._release_uid(slot.deployment.id)
        return len(doomed)

    def deployment(self, deployment_id: str) -> Deployment | None:
        """The live version of a deployment."""
        slot = self._slots.get(deployment_id)
        return slot.deployment if slot is not None else None

    def isolate(self, deployment_id: str) -> IsolateProcess | None:
        """The current isolate of a deployment (tests and diagnostics)."""
        slot = self._slots.get(deployment_id)
        return slot.current if slot is not None else None

    def deployment_ids(self) -> list[str]:
        """The deployments registered now."""
        return list(self._slots)

    def running_isolates(self) -> int:
        """How many deployments have an isolate process now (the operator's metrics)."""
        return sum(1 for slot in self._slots.values() if slot.current is not None)

    def evict_idle(self, idle_s: float) -> list[str]:
        """Stop the isolates that have had no request for ``idle_s`` seconds.

        Their deployments stay registered: the next request starts a new isolate (lazily), as
        after a restart. Returns the ids of the deployments whose isolate was stopped.
        """
        horizon = time.monotonic() - idle_s
        stopped = []
        for deployment_id, slot in self._slots.items():
            process = slot.current
            if process is not None and is_idle(process) and process.last_active <= horizon:
                slot.current = None
                process.drain()
                stopped.append(deployment_id)
        return stopped

    def _new_slot(self, deployment: Deployment, profile: Profile, plan: SandboxSpec | None) -> Slot:
        subrequests = SubrequestService(self.resources, deployment.limits.subrequests, self.network)
        services = DeploymentServices(deployment, self.registry, self.resources, subrequests)
        return Slot(deployment, services, E.Redactor(deployment.secrets), profile, plan)

    # -- events -------------------------------------------------------------------------------

    def fetch_ready(self, deployment_id: str, request: HttpRequest) -> InFlight | None:
        """``fetch``'s usual case without its coroutines: the request, sent to a ready isolate.

        Await its ``head`` (``client_gone`` if cancelled). None: ``fetch`` (the reference) must.
        """
        slot = self._slots.get(deployment_id)
        length = request.content_length
        if slot is None or (length and length > slot.deployment.limits.max_request_bytes):
            return None
        process = slot.current
        return process.begin_fetch(request) if process and process.fit_for_request() else None

    async def fetch(self, deployment_id: str, request: HttpRequest) -> HttpResponse:
        """Run a fetch event; every failure is answered with a response, never raised."""
        slot = self._slots.get(deployment_id)
        if slot is None:
            return platform_error_response(NOT_FOUND)
        limit = slot.deployment.limits.max_request_bytes
        if request.content_length is not None and request.content_length > limit:
            # Refused before any isolate sees it, yet a request like any other: logged.
            too_large = L.request_too_large(limit)
            self.events.emit(
                E.RequestEvent(
                    deployment_id, request.method, request.url, 413, 0.0, 0.0, too_large.tag
                )
            )
            return platform_error_response(too_large)
        process = slot.current
        if process is not None and process.fit_for_request():  # the usual case, no await
            return await process.fetch(request)
        started = time.monotonic()
        for _ in range(3):  # a version replaced while we waited for its isolate: use the new one
            try:
                process = await self._acquire(slot)
            except WorkerLoadError as exc:
                response = self._load_error_response(exc, accept_of(request))
                # No isolate saw it, yet a request like any other: logged ("failed to start").
                self.events.emit(
                    E.RequestEvent(
                        deployment_id,
                        request.method,
                        request.url,
                        response.status,
                        (time.monotonic() - started) * 1000,
                        0.0,
                        response.outcome,
                    )
                )
                return response
            if process.state is not State.DEAD:
                return await process.fetch(request)
            slot = self._slots.get(deployment_id) or slot
        return platform_error_response(L.STOPPING if self._closing else L.UNAVAILABLE)

    async def scheduled(
        self, deployment_id: str, cron: str, scheduled_time: float | None = None
    ) -> ScheduledResult:
        """Run a scheduled event and wait for it (and its waitUntil work) to finish."""
        slot = self._slots.get(deployment_id)
        if slot is None:
            return ScheduledResult(NOT_FOUND.tag, NOT_FOUND.message)
        started = time.monotonic()
        try:
            process = await self._acquire(slot)
        except WorkerLoadError as exc:
            return ScheduledResult(exc.error.tag, exc.detail, exc.traceback)
        when = scheduled_time if scheduled_time is not None else time.time() * 1000
        request = await process.scheduled(cron, when)
        outcome = await asyncio.shield(request.finished)
        message, trace = request.error or ("", "")
        self.events.emit(
            E.ScheduledEvent(deployment_id, cron, outcome, (time.monotonic() - started) * 1000)
        )
        return ScheduledResult(outcome, message, trace)

    async def _acquire(self, slot: Slot) -> IsolateProcess:
        process = slot.current
        if process is not None and process.fit_for_request():
            return process
        if slot.failure is not None:
            raise slot.failure
        if slot.starting is None:
            self._make_room(slot)
            # Registered before this returns to the loop: the next cold request's make_room
            # must count it, or a burst of them all find room under the cap.
            process = IsolateProcess(
                slot.deployment, slot.services, SupervisorHooks(self), self.poll_interval
            )
            self._owner[process] = slot
            slot.processes.add(process)
            slot.starting = asyncio.ensure_future(self._start_isolate(slot, process))
        return await asyncio.shield(slot.starting)

    def _load_error_response(self, exc: WorkerLoadError, accept: str) -> HttpResponse:
        if self.dev:
            title = (
                "Worker failed to start"
                if exc.error is not L.NO_HANDLER
                else "Worker has no handler"
            )
            return dev_error_response(title, exc.detail, exc.traceback, accept, exc.error.status)
        return platform_error_response(exc.error)
