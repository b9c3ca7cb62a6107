"""Live deployments: the control plane's state, running in the supervisor and routed.

The database says which version(s) of each worker are live; this module makes the supervisor and
the route table agree with it, one worker at a time and under that worker's lock:

- ``deploying(account, worker, versions)`` wraps a change that will make ``versions`` live: it
  first starts each version's isolate (so a version whose module does not load is refused with
  its error, before anything is committed, and the live version stays as it was), then lets the
  caller commit, then ``reconcile``s. A version just uploaded that cannot be started now (its
  account's share of the isolates, or all of them, busy) is refused too (``NotStartedNow``):
  made live unchecked, a module that does not load replaced a working version. A stored
  version (a rollback, a gradual deployment) loaded when it was uploaded: it goes live, and
  its isolate starts at its first request.
- ``reconcile(account, worker)`` reads the live deployment from the database, registers a slot
  for each of its versions that has none (lazily: no isolate until the first request), swaps the
  route in one assignment, and drains the slots no longer routed (in-flight requests finish on
  the code they started with). It is idempotent, so running it after every commit, at start-up
  and after a crash converges on what the database says. A worker that is gone (deleted, or
  its account expired) is not drained but stopped: its isolates, replaced versions' included,
  are killed, and its requests in flight get ``WORKER_DELETED`` / ``ACCOUNT_EXPIRED``.
- ``drop_account`` stops every route, slot and isolate of an account (its expiry, its sweep).
- A temporary account's end is watched (``expiry.AccountExpiry``) while it has live workers.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ember.bindings.registry import BindingRegistry
from ember.errors import LimitExceeded
from ember.runtime import events as E
from ember.runtime.capacity import IsolateShareExhausted
from ember.runtime.deployments.errors import InvalidUpload, NotStartedNow, ScriptNotFound
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Account, Script, Version
from ember.runtime.lifecycle import WorkerLoadError
from ember.runtime.limits import Limits, PlatformError
from ember.runtime.platform.expiry import AccountExpiry
from ember.runtime.platform.routing import RouteTable, WorkerRoute
from ember.runtime.platform.translate import (
    VersionSlot,
    build_slot,
    cpu_nest,
    slot_id,
    slot_prefix,
)
from ember.runtime.sandbox import ANONYMOUS, FULL, MinimumLayersMissing, Profile
from ember.runtime.supervisor import Supervisor

# What a request in flight on a worker that is gone gets (a streamed body is cut).
ACCOUNT_EXPIRED = PlatformError(
    503, None, "Worker stopped: its temporary account expired.", "account_expired"
)
WORKER_DELETED = PlatformError(503, None, "Worker stopped: it was deleted.", "worker_deleted")
EXPIRED_REASON = "its temporary account expired"
DELETED_REASON = "the worker was deleted"


class WorkerStartupFailed(InvalidUpload):
    """The version's module did not load; it was not made live (code 10021, as on Cloudflare)."""


class SandboxRefused(InvalidUpload):
    """This host cannot give the account's workers the sandbox they need (temporary accounts
    below the anonymous minimum): nothing was deployed."""

    http_status, cf_code = 403, 1034


def profile_for(temporary: bool) -> Profile:
    """Workers of temporary accounts run anonymous code; permanent accounts' run under FULL."""
    return ANONYMOUS if temporary else FULL


@dataclass(frozen=True)
class LiveChange:
    """A worker's live deployment changed (``slots`` empty: it is no longer served)."""

    account_name: str
    script_name: str
    slots: tuple[VersionSlot, ...]
    percentages: tuple[float, ...]


class LiveDeployments:
    """See the module docstring."""

    def __init__(
        self,
        plane: ControlPlane,
        supervisor: Supervisor,
        registry: BindingRegistry,
        routes: RouteTable,
        on_change: Callable[[LiveChange], None] | None = None,
        base_limits: Limits | None = None,
        expiry: AccountExpiry | None = None,
    ) -> None:
        self.plane = plane
        self.supervisor = supervisor
        self.registry = registry
        self.routes = routes
        self.on_change = on_change
        self.base_limits = base_limits
        self.expiry = expiry
        self._slots: dict[str, VersionSlot] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def slot(self, ident: str) -> VersionSlot | None:
        """The version behind a supervisor slot id."""
        return self._slots.get(ident)

    def slots(self) -> list[VersionSlot]:
        return list(self._slots.values())

    def _lock(self, account_id: str, name: str) -> asyncio.Lock:
        return self._locks.setdefault((account_id, name), asyncio.Lock())

    # -- start-up -------------------------------------------------------------------------------

    async def load_all(self) -> int:
        """Register every live deployment of every unexpired account; returns how many."""
        now = self.plane.clock()
        for account in self.plane.accounts.list():
            if account.expired(now):
                continue
            for script in self.plane.scripts.list(account):
                await self.reconcile(account.id, script.name, announce=False)
        return len(self.routes)

    # -- changes --------------------------------------------------------------------------------

    @asynccontextmanager
    async def deploying(
        self, account: Account, name: str, version_ids: list[str], *, uploaded: bool = False
    ) -> AsyncIterator[None]:
        """Start ``version_ids`` (refusing any that fails to load), run the body, reconcile.

        ``uploaded``: the versions are new (this request stored them), so each must be started
        now; one that cannot be is refused (``NotStartedNow``) rather than made live unchecked.
        """
        async with self._lock(account.id, name):
            try:
                for version_id in version_ids:
                    await self._prepare(account, name, version_id, uploaded=uploaded)
                yield
            finally:
                await self._reconcile(account.id, name, warm=False, announce=True)

    async def prepare(self, account: Account, name: str, version_id: str) -> None:
        """Start a version's isolate without routing to it (``POST .../versions``).

        wrangler's redeploy deploys it next, warm. An earlier upload that was never deployed
        is stopped here: ``versions upload`` run many times keeps one waiting isolate (and
        sandbox uid) per worker, not one per upload.
        """
        async with self._lock(account.id, name):
            await self._prepare(account, name, version_id, uploaded=True)
            route = self.routes.get(account.name, name)
            keep = {ident for ident, _ in route.targets} if route else set()
            keep.add(slot_id(account, name, version_id))
            for slot in [
                s
                for s in self._slots.values()
                if s.account_id == account.id and s.script_name == name and s.slot_id not in keep
            ]:
                del self._slots[slot.slot_id]
                if slot.deployment is not None:
                    await self.supervisor.remove(slot.slot_id)

    async def reconcile(
        self, account_id: str, name: str, *, warm: bool = False, announce: bool = True
    ) -> None:
        """Make the route and slots of one worker match the database (see module docstring)."""
        async with self._lock(account_id, name):
            await self._reconcile(account_id, name, warm=warm, announce=announce)

    async def reconcile_account(self, account_id: str, *, warm: bool = False) -> None:
        """Reconcile every worker of an account (after a claim changed its limits)."""
        account = self.plane.accounts.find(account_id)
        names = {s.script_name for s in self._slots.values() if s.account_id == account_id}
        if account is not None:
            names |= {s.name for s in self.plane.scripts.list(account)}
        for name in sorted(names):
            await self.reconcile(account_id, name, warm=warm)

    async def drop_account(
        self,
        account_id: str,
        error: PlatformError = ACCOUNT_EXPIRED,
        reason: str = EXPIRED_REASON,
    ) -> int:
        """Stop every worker of an account now (it expired, or is being deleted): routes and
        slots removed, every isolate of the account killed, replaced versions' included, its
        requests in flight answered with ``error``. Returns how many isolates were killed."""
        for slot in [s for s in self._slots.values() if s.account_id == account_id]:
            async with self._lock(account_id, slot.script_name):
                self._slots.pop(slot.slot_id, None)
                removed = self.routes.remove(slot.account_name, slot.script_name)
                if removed is not None and self.on_change is not None:
                    self.on_change(LiveChange(slot.account_name, slot.script_name, (), ()))
        prefix = slot_prefix(account_id)
        killed = await self.supervisor.stop(lambda ident: ident.startswith(prefix), error, reason)
        if self.expiry is not None:
            self.expiry.forget(account_id)
        for key in [k for k in self._locks if k[0] == account_id]:
            self._locks.pop(key, None)
        return killed

    # -- under the worker's lock ----------------------------------------------------------------

    def _watch(self, account: Account | None) -> None:
        """Keep the expiry of a live account's end in step: watched while it is temporary,
        forgotten once claimed."""
        if self.expiry is None or account is None:
            return
        if account.temporary and account.expires_at is not None:
            self.expiry.watch(account.id, account.expires_at)
        else:
            self.expiry.forget(account.id)

    def _script(self, account: Account, name: str) -> Script | None:
        try:
            return self.plane.scripts.get(account, name)
        except ScriptNotFound:
            return None

    async def _build_slot(self, account: Account, script: Script, version: Version) -> VersionSlot:
        """``build_slot`` on a thread: it reads the version's modules from the database and
        writes them out when not yet on disk (10,000 small files: a second or more), work
        that must not hold up the event loop every tenant is served from. Called under the
        worker's lock, so one worker's slots are still built one at a time, in order."""
        return await asyncio.to_thread(
            build_slot, self.plane, self.registry, account, script, version, self.base_limits
        )

    async def _prepare(
        self, account: Account, name: str, version_id: str, *, uploaded: bool
    ) -> None:
        if slot_id(account, name, version_id) in self._slots:
            return  # already running or registered: it loaded before
        script = self.plane.scripts.get(account, name)
        version = self.plane.scripts.version(account, name, version_id)
        slot = await self._build_slot(account, script, version)
        if slot.deployment is not None:
            try:
                error = await self.supervisor.deploy(
                    slot.deployment,
                    eager=True,
                    sandbox=profile_for(account.temporary),
                    pools=slot.pools,
                    cpu_nest=cpu_nest(slot),
                )
            except MinimumLayersMissing as exc:
                raise SandboxRefused(
                    f"Worker {name!r} was not deployed: this platform cannot sandbox it as "
                    f"its account needs ({exc})"
                ) from None
            if error is not None and error.transient and uploaded:
                await self.supervisor.remove(slot.slot_id)
                raise _not_started_now(name, error)
            if error is not None and not error.transient:
                await self.supervisor.remove(slot.slot_id)
                redact = E.Redactor(slot.deployment.secrets)
                trace = f"\n{redact(error.traceback).rstrip()}" if error.traceback else ""
                raise WorkerStartupFailed(
                    f"Worker {name!r} failed to start, so it was not deployed (the live version "
                    f"is unchanged): {redact(error.detail)}{trace}"
                )
        self._slots[slot.slot_id] = slot

    async def _reconcile(self, account_id: str, name: str, *, warm: bool, announce: bool) -> None:
        account = self.plane.accounts.find(account_id)
        live = None
        script: Script | None = None
        gone: tuple[PlatformError, str] | None = (ACCOUNT_EXPIRED, EXPIRED_REASON)
        if account is not None and not account.expired(self.plane.clock()):
            script = self._script(account, name)
            live = self.plane.scripts.live(account, name) if script is not None else None
            gone = (WORKER_DELETED, DELETED_REASON) if script is None else None
        targets: list[tuple[str, float]] = []
        if account is not None and live is not None:
            for target in live.versions:
                ident = slot_id(account, name, target.version_id)
                if ident not in self._slots:
                    version = self.plane.scripts.version(account, name, target.version_id)
                    slot = await self._build_slot(account, script, version)
                    if slot.deployment is not None:
                        try:
                            await self.supervisor.deploy(
                                slot.deployment,
                                eager=warm,
                                sandbox=profile_for(account.temporary),
                                pools=slot.pools,
                                cpu_nest=cpu_nest(slot),
                            )
                        except MinimumLayersMissing as exc:  # the host lost a layer since
                            slot = dataclasses.replace(
                                slot, deployment=None, unsupported=f"no sandbox for it here ({exc})"
                            )
                    self._slots[ident] = slot
                targets.append((ident, target.percentage))
        stale = [
            s
            for s in self._slots.values()
            if s.account_id == account_id
            and s.script_name == name
            and s.slot_id not in {ident for ident, _ in targets}
        ]
        account_name = (
            account.name if account is not None else (stale[0].account_name if stale else "")
        )
        old = self.routes.get(account_name, name)
        if targets:
            expires = account.expires_at if account is not None else None
            self.routes.set(WorkerRoute(account_name, name, tuple(targets), expires))
            self._watch(account)
        else:
            self.routes.remove(account_name, name)
        for slot in stale:
            del self._slots[slot.slot_id]
            if slot.deployment is not None and gone is None:
                await self.supervisor.remove(slot.slot_id)  # drained: a newer version serves
        if gone is not None and not targets:  # deleted or expired: nothing of it runs on
            prefix = slot_prefix(account_id, name)
            await self.supervisor.stop(lambda ident: ident.startswith(prefix), *gone)
        changed = (old.targets if old else ()) != tuple(targets)
        if changed and announce and self.on_change is not None:
            self.on_change(
                LiveChange(
                    account_name,
                    name,
                    tuple(self._slots[ident] for ident, _ in targets),
                    tuple(pct for _, pct in targets),
                )
            )


def _not_started_now(name: str, error: WorkerLoadError) -> NotStartedNow:
    """The refusal of a new version that could not be started (``error``: transient) to check
    that its module loads, naming what was full and the way past it."""
    cause = error.__cause__  # the supervisor's IsolateShareExhausted or IsolatesExhausted
    limit = cause.limit if isinstance(cause, LimitExceeded) else "isolates"
    remedy = cause.pool.remedy if isinstance(cause, IsolateShareExhausted) else ""
    return NotStartedNow(
        limit,
        None,
        None,
        f"Worker {name!r} was not deployed and nothing live changed: its new version could "
        f"not be started to check that its module loads, as {error.detail}. Try again when "
        "one of those isolates is free" + (f", or {remedy}" if remedy else "") + ".",
    )
