"""One deployment's slot in the supervisor, and the turnover of its isolates.

A ``Slot`` is what the supervisor keeps per deployment: its ``Deployment`` value, its binding
services, its current isolate, the load failure of its version (sticky: no respawn storm), and
the isolates still draining. ``SlotIsolates`` starts a slot's isolate under the isolate cap,
hears when one dies or must be recycled, and retires a replaced or removed slot. It is apart
from ``supervisor.py`` because that module is the API (deploy, fetch, scheduled, remove); this
one is the bookkeeping of isolates behind it.

``SlotIsolates`` is a mixin of ``Supervisor`` (like ``watchdog.LimitWatch`` of
``IsolateProcess``): the isolate hooks (``hooks.SupervisorHooks``) call these methods on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ember.runtime import events as E
from ember.runtime import limits as L
from ember.runtime.capacity import (
    IsolateCap,
    IsolatePool,
    IsolatesExhausted,
    IsolateShareExhausted,
)
from ember.runtime.child import ChildSpec, child_environment
from ember.runtime.deployment import Deployment
from ember.runtime.isolation import Isolation
from ember.runtime.lifecycle import State, WorkerLoadError
from ember.runtime.process import IsolateProcess
from ember.runtime.sandbox import Profile, SandboxSpec
from ember.runtime.services import DeploymentServices
from ember.runtime.spawner import Spawner


@dataclass(eq=False)
class Slot:
    """One deployment in the supervisor: its version, services and isolates."""

    deployment: Deployment
    services: DeploymentServices
    redact: E.Redactor
    profile: Profile
    sandbox: SandboxSpec | None  # None: the dev child (hygiene and rlimits only)
    current: IsolateProcess | None = None
    starting: asyncio.Task[IsolateProcess] | None = None
    failure: WorkerLoadError | None = None
    processes: set[IsolateProcess] = field(default_factory=set)
    retired: bool = False
    # The pools its isolates count in, each held to a share of the cap (``capacity.py``):
    # its account's, and temporary accounts' together; none in ``ember dev``.
    pools: tuple[IsolatePool, ...] = ()


class SlotIsolates:
    """Starts, recycles, buries and retires the isolates of the supervisor's slots."""

    # Set by Supervisor.__init__; read and updated here.
    events: E.EventSink
    spawner: Spawner
    isolation: Isolation
    cap: IsolateCap
    _slots: dict[str, Slot]
    _owner: dict[IsolateProcess, Slot]
    _closing: bool

    async def _release_uid(self, deployment_id: str) -> None:
        """Give back a removed deployment's pool uid (not if it was deployed again since)."""
        if deployment_id not in self._slots and not self._closing:  # close() releases all
            await self.isolation.release(deployment_id)

    async def _retire(
        self,
        slot: Slot,
        *,
        kill: bool,
        error: L.PlatformError = L.UNAVAILABLE,
        reason: str = "supervisor stopping",
    ) -> None:
        slot.retired = True
        for process in list(slot.processes):
            if kill:
                process.kill(error, reason)
            else:
                process.drain()
        slot.current = None
        if not slot.processes:
            await slot.services.close()

    def _make_room(self, slot: Slot) -> None:
        """Under the isolate cap and the slot's shares of it, or stop the least recently used
        idle isolate of what is full; else 503."""
        try:
            room = self.cap.make_room(
                {process: owner.pools for process, owner in self._owner.items()}, slot.pools
            )
        except IsolateShareExhausted as exc:
            self.events.emit(E.LifecycleEvent(slot.deployment.id, "warn", f"not started: {exc}"))
            raise WorkerLoadError(exc.error(), str(exc), transient=True) from exc
        except IsolatesExhausted as exc:
            self.events.emit(E.LifecycleEvent(slot.deployment.id, "warn", f"not started: {exc}"))
            raise WorkerLoadError(L.ISOLATES_EXHAUSTED, str(exc), transient=True) from exc
        owner = self._owner.get(room.victim) if room is not None else None
        if room is not None and owner is not None:
            owner.current = None if owner.current is room.victim else owner.current
            room.victim.drain()
            self.events.emit(E.LifecycleEvent(owner.deployment.id, "warn", room.reason))

    async def _start_isolate(self, slot: Slot, process: IsolateProcess) -> IsolateProcess:
        deployment = slot.deployment
        spec = ChildSpec(
            deployment_id=deployment.id,
            code_dir=str(deployment.code_dir),
            ipc_fd=0,
            env=child_environment(deployment),
            memory_bytes=deployment.limits.memory_bytes,
            sandbox=slot.sandbox.to_wire() if slot.sandbox is not None else {},
        )
        try:
            await process.start(self.spawner, spec)
        except WorkerLoadError as exc:
            if not exc.transient:
                slot.failure = exc
            self.events.emit(
                E.ExceptionEvent(deployment.id, slot.redact(exc.detail), slot.redact(exc.traceback))
            )
            raise
        except BaseException:
            process.kill(L.UNAVAILABLE, "start interrupted")
            raise
        finally:
            slot.starting = None
        if slot.retired:
            process.drain()  # waiters retry on the version that replaced this one
        else:
            slot.current = process
        return process

    # -- callbacks from isolate processes (see hooks.SupervisorHooks) ---------------------

    def _slot_of(self, process: IsolateProcess) -> Slot | None:
        return self._owner.get(process)

    def _process_dead(
        self, process: IsolateProcess, error: L.PlatformError | None, reason: str
    ) -> None:
        slot = self._owner.pop(process, None)
        if slot is None:
            return
        slot.processes.discard(process)
        if slot.current is process:
            slot.current = None
        if error is not None and slot.failure is None and process.state is State.DEAD:
            level = "info" if error.tag in (L.UNAVAILABLE.tag, L.STOPPING.tag) else "warn"
            self.events.emit(
                E.LifecycleEvent(slot.deployment.id, level, f"isolate stopped: {reason}")
            )
        if slot.retired and not slot.processes:
            asyncio.ensure_future(slot.services.close())
            asyncio.ensure_future(self._release_uid(slot.deployment.id))

    def _recycle(self, process: IsolateProcess, reason: str) -> None:
        slot = self._owner.get(process)
        if slot is None:
            return
        if slot.current is process:
            slot.current = None
            self.events.emit(
                E.LifecycleEvent(slot.deployment.id, "warn", f"replacing isolate: {reason}")
            )
        process.drain()
