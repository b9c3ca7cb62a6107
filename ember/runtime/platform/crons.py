"""Cron triggers on ``ember serve``: one scheduler per worker that has crons and is live.

The crons belong to the worker (``PUT .../schedules``); each firing runs on whatever version is
live at that moment (the route is read when the event fires, so a deploy or rollback in between
is honoured). ``refresh`` is called after anything that may change a worker's crons or whether it
is live; it restarts that worker's scheduler from the database.
"""

from __future__ import annotations

import asyncio
import logging

from ember.runtime.cron import WEEKDAY_NUMBERING, CronExpression
from ember.runtime.deployments.errors import ScriptNotFound
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Script
from ember.runtime.platform.routing import RouteTable
from ember.runtime.scheduler import CronScheduler
from ember.runtime.supervisor import ScheduledResult, Supervisor

log = logging.getLogger(__name__)


def schedulable(
    stored: object, worker: str, warned: set[tuple[str, str]] | None = None
) -> tuple[str, ...]:
    """The crons of a worker's stored ``schedules`` that parse. One saved before the parser
    changed (weekday 0, Sunday until ember counted 1-7 as the platform does) is left out with a
    warning naming it: it must not stop ``ember serve`` from starting, nor the worker's other
    crons. One saved then with another numeric weekday parses, but now fires a day earlier
    than it did (its 1 was Monday): that is warned of too, until its crons are stored again.
    Each warning once a process for a (worker, cron) in ``warned`` (a refresh follows every
    deploy)."""
    kept = []
    for item in stored if isinstance(stored, list) else []:
        cron = item.get("cron") if isinstance(item, dict) else None
        if not isinstance(cron, str):
            continue
        told = warned is not None and (worker, cron) in warned
        try:
            CronExpression.parse(cron)
        except ValueError as error:
            if not told:
                _told(warned, worker, cron)
                log.warning(
                    "worker %s: its stored cron %r does not parse (%s): not scheduled; deploy "
                    "its crons again (PUT .../schedules or ember deploy)",
                    worker,
                    cron,
                    error,
                )
            continue
        fields = cron.split()
        numbered = len(fields) == 5 and any(c.isdigit() for c in fields[4])
        if numbered and item.get("weekdays") != WEEKDAY_NUMBERING and not told:
            _told(warned, worker, cron)
            log.warning(
                "worker %s: its cron %r was stored when ember counted weekdays from 0 = Sunday; "
                "it now counts them as the platform does, 1 = Sunday to 7 = Saturday, so this "
                "cron fires a day earlier than it did. Deploy its crons again (PUT "
                ".../schedules or ember deploy) to keep this schedule and end this warning",
                worker,
                cron,
            )
        kept.append(cron)
    return tuple(kept)


def _told(warned: set[tuple[str, str]] | None, worker: str, cron: str) -> None:
    # Only what was warned of: every cron ever refreshed would grow the set (review45).
    if warned is not None:
        warned.add((worker, cron))


class WorkerCrons:
    """The running cron schedulers, by (account id, worker)."""

    def __init__(self, plane: ControlPlane, supervisor: Supervisor, routes: RouteTable) -> None:
        self.plane = plane
        self.supervisor = supervisor
        self.routes = routes
        self._tasks: dict[tuple[str, str], tuple[tuple[str, ...], asyncio.Task[None]]] = {}
        self._warned: set[tuple[str, str]] = set()  # old-numbered crons said once a process

    def refresh(self, account_id: str, name: str) -> None:
        """(Re)start or stop the scheduler of one worker to match the database and its route."""
        account = self.plane.accounts.find(account_id)
        crons: tuple[str, ...] = ()
        if account is not None and self.routes.get(account.name, name) is not None:
            try:
                script: Script | None = self.plane.scripts.get(account, name)
            except ScriptNotFound:
                script = None
            if script is not None:
                crons = schedulable(
                    script.settings.get("schedules"), f"{account.name}/{name}", self._warned
                )
        key = (account_id, name)
        current = self._tasks.get(key)
        if current is not None and current[0] == crons:
            return
        if current is not None:
            current[1].cancel()
            del self._tasks[key]
        if crons and account is not None:
            account_name = account.name

            async def fire(cron: str, when_ms: float) -> None:
                await self.run(account_name, name, cron, when_ms)

            task = asyncio.ensure_future(CronScheduler(crons, fire).run())
            self._tasks[key] = (crons, task)

    def drop_account(self, account_id: str) -> None:
        for key in [k for k in self._tasks if k[0] == account_id]:
            self._tasks.pop(key)[1].cancel()

    async def run(
        self, account_name: str, name: str, cron: str, when_ms: float | None = None
    ) -> ScheduledResult:
        """Run one scheduled event on the live version of a worker."""
        CronExpression.parse(cron)
        route = self.routes.get(account_name, name)
        if route is None:
            return ScheduledResult("not_found", f"Worker {name!r} has no live deployment")
        return await self.supervisor.scheduled(route.pick(), cron, when_ms)

    def close(self) -> None:
        for _, task in self._tasks.values():
            task.cancel()
        self._tasks.clear()
