"""``ember serve``'s lifespan: what starts and stops with the server, and the housekeeping between.

Startup starts the zygote, refuses to go on when no layer walls workers off the state directory
(``tenancy.py``), starts the AI pool if the operator asked for it eagerly, repairs the KV store's
namespace list, removes version files a crash left, and registers the live deployments and their
crons; the housekeeping task then stops idle isolates and deletes expired temporary accounts
until shutdown. Apart from ``app.py``, which routes each request, because none of this runs per
request.

``PlatformLifespan`` is a mixin of ``Platform`` (like ``watchdog.LimitWatch`` of
``IsolateProcess``): it works on the parts ``Platform.__init__`` builds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.tail_events import TailHub
from ember.runtime.limits import PlatformError
from ember.runtime.platform.activation import ACCOUNT_EXPIRED, EXPIRED_REASON, LiveDeployments
from ember.runtime.platform.crons import WorkerCrons
from ember.runtime.platform.expiry import AccountExpiry
from ember.runtime.platform.refusal_log import RefusalLog
from ember.runtime.platform.tenancy import Tenancy, assess
from ember.runtime.supervisor import Supervisor

if TYPE_CHECKING:
    from ember.runtime.platform.app import PlatformOptions


class PlatformLifespan:
    """Startup, shutdown and housekeeping of one ``Platform``."""

    # Set by Platform.__init__; read and updated here.
    options: PlatformOptions
    print_line: Callable[[str], None]
    hub: TailHub
    supervisor: Supervisor
    plane: ControlPlane
    live: LiveDeployments
    crons: WorkerCrons
    refusals: RefusalLog
    expiry: AccountExpiry
    api: Any
    tenancy: Tenancy | None
    startup_error: Exception | None
    _housekeeping: asyncio.Task[None] | None
    _asset_reads: Executor
    _sweep: asyncio.Future[Any] | None = None  # the expiry sweep's thread, while it runs

    if TYPE_CHECKING:  # defined by Platform

        def _gateway(self) -> Any: ...

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    self.startup_error = exc  # ember serve's error boundary reports it
                    message = "the platform did not start; the reason follows"
                    await send({"type": "lifespan.startup.failed", "message": message})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        """Start the zygote, repair the KV namespace list and version files, go live."""
        await self.supervisor.start()
        status = self.supervisor.sandbox_status()
        self.tenancy = assess(status, self.options.state_dir, trusted=self.options.trusted_workers)
        if not self.tenancy.admits:  # fail closed, before any deployment goes live
            await self.supervisor.close()
            self.tenancy.require()
        ai = self.options.ai
        if ai is not None and ai.pool.settings.start == "eager":
            await self._gateway().start()
        # Off the loop, though nothing is served yet: the lifespan's own timers keep running.
        for note in await asyncio.to_thread(
            self.plane.prepare_storage, self.options.compact, self.print_line
        ):
            self.print_line(note)
        self.plane.namespaces.sync_store()
        # A crash's leftovers, before serving; on a thread, as prepare_storage: thousands of
        # version folders to list and remove held up the lifespan's timers on the loop.
        orphans = await asyncio.to_thread(self.plane.gc.remove_orphan_files)
        if orphans:
            self.print_line(f"[ember] removed {orphans} version folder(s) a crash left behind")
        await self.live.load_all()
        for account_id, name in {(s.account_id, s.script_name) for s in self.live.slots()}:
            self.crons.refresh(account_id, name)
        self._housekeeping = asyncio.ensure_future(self._housekeep())

    async def shutdown(self) -> None:
        self.refusals.flush(everything=True)
        self.plane.gc.stop()  # a sweep on its thread ends after its batch, before plane.close
        self.expiry.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        if self._sweep is not None:  # its thread outlives the cancelled task: let it stop
            with contextlib.suppress(Exception):
                await self._sweep
        self.crons.close()
        await self.supervisor.close()
        self.api.state.uploads.close()  # finishes a store in progress before the database closes
        self.plane.close()
        self._asset_reads.shutdown(wait=False)

    async def _housekeep(self) -> None:
        loop = asyncio.get_running_loop()
        next_gc = loop.time()
        while True:
            self.refusals.flush()  # the sums of the refused AI calls' lines left out
            stopped = self.supervisor.evict_idle(self.options.idle_timeout_s)
            if stopped and self.options.log_requests:
                self.print_line(f"[ember] stopped {len(stopped)} idle isolate(s)")
            if loop.time() >= next_gc:
                next_gc = loop.time() + self.options.gc_interval_s
                try:
                    await self.collect_garbage()
                except Exception as exc:  # a failed pass is retried on the next one
                    self.print_line(f"[ember] garbage collection failed: {exc}")
            await asyncio.sleep(self.options.housekeeping_s)

    async def collect_garbage(self) -> tuple[str, ...]:
        """Delete expired temporary accounts (workers stopped first); returns their ids.

        The deletion (``GarbageCollector.collect``: rows, files, freed pages) runs on a thread
        in bounded batches: on the event loop it stopped every tenant for as long as the
        account's data and a whole-file VACUUM took, which any anonymous client could cause.
        ``collect`` is ember's sweep, not Python's ``gc.collect``: its purpose is the deletion.
        The accounts are marked first (claims of them are refused from then on), their workers
        stopped, and exactly those deleted: one that expires meanwhile waits for the next pass
        rather than being deleted with its workers still running.
        """
        gc = self.plane.gc
        self._sweep = asyncio.ensure_future(asyncio.to_thread(gc.mark_expired))
        marked = await asyncio.shield(self._sweep)
        for account_id in marked:
            await self._stop_account(account_id)
        self._sweep = asyncio.ensure_future(asyncio.to_thread(gc.collect, marked))
        report = await asyncio.shield(self._sweep)
        for account_id in report.accounts_deleted:
            self.print_line(f"[ember] deleted expired temporary account {account_id}")
        for failure in report.failures:
            self.print_line(f"[ember] garbage collection: {failure}")
        return report.accounts_deleted

    async def _account_expired(self, account_id: str) -> None:
        """A temporary account's end came (``AccountExpiry``): its workers stop now. The sweep
        deletes its data later; until then it answers as a deleted account does."""
        try:
            account = self.plane.accounts.find(account_id)
            if account is None or not account.temporary:  # deleted or claimed meanwhile
                self.expiry.forget(account_id)
                return
            if account.expires_at is not None and not account.expired(self.plane.clock()):
                self.expiry.watch(account_id, account.expires_at)  # the clock stepped back
                return
            stopped = await self._stop_account(account_id)
            self.print_line(
                f"[ember] temporary account {account.name} expired: {stopped} isolate(s) "
                "stopped; the sweep deletes its data"
            )
        except Exception as exc:  # the sweep stops it too, later: say so, keep serving
            self.print_line(f"[ember] stopping expired account {account_id} failed: {exc}")

    async def _stop_account(
        self, account_id: str, error: PlatformError = ACCOUNT_EXPIRED, reason: str = EXPIRED_REASON
    ) -> int:
        """End an account's tails, crons and isolates now; returns the isolates killed."""
        for slot in [s for s in self.live.slots() if s.account_id == account_id]:
            self.hub.close_script(slot.script_id)
        self.crons.drop_account(account_id)
        return await self.live.drop_account(account_id, error, reason)
