"""``ember serve``'s one ASGI application: workers by host or path, everything else the API.

    Host: <worker>.<account>.localhost / .workers.dev  ─┐
    /w/<account>/<worker>/...                          ─┴─> Router ─> Supervisor ─> isolates
    /client/v4/..., /claim-preview, the tail WebSocket ────> control API (one ControlPlane)

One ``Platform`` owns the supervisor, the control plane (sharing the supervisor's KV store, so
the REST API and ``env.KV`` see one store), the live routes, the tail hub, the cron schedulers
and the housekeeping task (idle isolates stopped, expired temporary accounts deleted).
Startup, shutdown and housekeeping are in ``lifespan.py`` (mixed in); the control API's
hooks into what is live in ``live_hooks.py``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.bindings.kv.service import POOL_SOURCE_KEY, shared_store
from ember.bindings.registry import BindingRegistry, default_registry
from ember.runtime.api.app import create_api_app
from ember.runtime.assets_front import asset_reads, assets_route, send_answer
from ember.runtime.capacity import default_max_isolates
from ember.runtime.console_gate import CHARS_PER_SECOND as CONSOLE_CHARS_PER_SECOND
from ember.runtime.deployments.config import PlatformConfig
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.tail_events import TailHub
from ember.runtime.isolation import SandboxPolicy
from ember.runtime.limits import Limits
from ember.runtime.platform.activation import LiveChange, LiveDeployments
from ember.runtime.platform.ai import (
    CACHE_SALT_KEY,
    ai_available,
    ai_routes_for,
    configure_gateway,
    limit_ai_bindings,
)
from ember.runtime.platform.ai_log import call_line, refusal_key, with_access_log
from ember.runtime.platform.crons import WorkerCrons
from ember.runtime.platform.expiry import AccountExpiry
from ember.runtime.platform.health import health_route
from ember.runtime.platform.lifespan import PlatformLifespan
from ember.runtime.platform.live_hooks import PlatformHooks
from ember.runtime.platform.metrics import CONTENT_TYPE, Snapshot, render
from ember.runtime.platform.observe import PlatformEvents, operator_printer
from ember.runtime.platform.overrides import pinned_version
from ember.runtime.platform.refusal_log import RefusalLog
from ember.runtime.platform.routing import (
    RouteTable,
    WorkerRoute,
    host_header,
    split_worker_path,
    worker_of_host,
)
from ember.runtime.platform.shared_origin import (
    guarded_send,
    service_worker_refusal,
    service_worker_script,
)
from ember.runtime.platform.stamp import utc_stamp
from ember.runtime.platform.tenancy import Tenancy
from ember.runtime.router import Router
from ember.runtime.sandbox import FULL
from ember.runtime.services import DeploymentHost
from ember.runtime.spawner import SpawnerConfig
from ember.runtime.supervisor import Supervisor
from ember.storage import StorageHealth

SLOT_KEY = "ember.slot"
ACCOUNT_NAMES_KEPT = 10_000  # the log's id -> name cache, cleared past this
Scope = dict[str, Any]


@dataclass(frozen=True)
class PlatformOptions:
    """How ``ember serve`` runs."""

    state_dir: Path
    config: PlatformConfig = field(default_factory=PlatformConfig)
    idle_timeout_s: float = 300.0  # an isolate with no request for this long is stopped
    housekeeping_s: float = 5.0  # how often idle isolates are looked for
    gc_interval_s: float = 30.0  # how often expired temporary accounts are deleted
    log_requests: bool = False
    spawner: SpawnerConfig | None = None
    registry: BindingRegistry | None = None
    # Workers of permanent accounts run under the policy's default profile (FULL: every layer
    # the host offers), temporary accounts' under ANONYMOUS, refused below the minimum unless
    # ``allow_below_minimum`` (see ember/runtime/isolation.py).
    sandbox: SandboxPolicy = field(default_factory=lambda: SandboxPolicy(default_profile=FULL))
    ai: Any = None  # the operator's GatewayConfig (models, pool, quotas); None: defaults
    trusted_workers: bool = False  # serve even if no layer walls workers off the state dir
    # Cap each SQLite store at this many pages (at least its size at start): writes past it
    # fail as on a full disk. Tests use it to fill the disk without filling one.
    storage_max_pages: int | None = None
    # Rewrite both SQLite files (VACUUM) before serving: ``ember serve --compact``.
    compact: bool = False


class Platform(PlatformLifespan):
    """See the module docstring; an ASGI application."""

    def __init__(self, options: PlatformOptions, print_line: Callable[[str], None] = print):
        self.options = options
        self.print_line = print_line = operator_printer(print_line)
        self.hub = TailHub()
        registry = options.registry or default_registry()
        limit_ai_bindings(registry)
        self.events = PlatformEvents(
            self.hub,
            self._slot,
            print_line,
            log_requests=options.log_requests,
            account_name=self._account_name,
        )
        self.supervisor = Supervisor(
            state_dir=options.state_dir,
            events=self.events,
            registry=registry,
            spawner=options.spawner,
            dev=False,
            sandbox=options.sandbox,
            max_isolates=options.config.max_isolates or default_max_isolates(),
        )
        self.supervisor.tracing = self.events.tracing
        kv = shared_store(DeploymentHost(self.supervisor.resources, "platform"))
        self.plane = ControlPlane(
            options.state_dir,
            options.config,
            kv_store=kv,
            anonymous_policy=self._anonymous,
            storage=StorageHealth(print_line),
        )
        # Each account's AI requests carry its own cache salt, keyed by the platform's secret.
        configure_gateway(
            self.supervisor.resources, options.ai, self.plane.meta_secret(CACHE_SALT_KEY)
        )
        # The workers' env.KV of temporary accounts reads the temporary accounts' pool here.
        self.supervisor.resources.shared(POOL_SOURCE_KEY, lambda: self.plane.temporary_total)
        if options.storage_max_pages is not None:
            self.plane.db.limit_pages(options.storage_max_pages)
            self.plane.kv.store.limit_pages(options.storage_max_pages)
        self.routes = RouteTable(self.plane.clock)
        # A temporary account's workers stop at its expiry, not at the sweep (expiry.py).
        self.expiry = AccountExpiry(self.plane.clock, self._account_expired)
        self.supervisor.call_refusal = self._call_refusal
        # Tenants share this process: each isolate's console output has a budget here.
        base_limits = Limits(console_chars_per_s=CONSOLE_CHARS_PER_SECOND)
        self.live = LiveDeployments(
            self.plane,
            self.supervisor,
            registry,
            self.routes,
            on_change=self._changed,
            expiry=self.expiry,
            base_limits=base_limits,
        )
        self.crons = WorkerCrons(self.plane, self.supervisor, self.routes)
        self.router = Router(self.supervisor, lambda scope: scope.get(SLOT_KEY))
        self._account_names: dict[str, str] = {}
        self._asset_reads = asset_reads()  # never behind tenants' env.ASSETS work (review18)
        # --log-requests: an account's refused AI calls, a few lines a minute and a sum.
        self.refusals = RefusalLog(print_line, self._account_name)
        self.api = create_api_app(
            self.plane,
            self.hub,
            live=PlatformHooks(self),
            first_routes=[
                *self._ai_routes(print_line),
                health_route(
                    self._gateway_if_any,
                    lambda: self.tenancy.to_dict() if self.tenancy else {},
                    self.plane.storage,
                ),
            ],
        )
        self.origin: str | None = None  # http://host:port once listening
        self.metrics_port: int | None = None  # the metrics listener's port, when serving one
        # What the HTTP layer refused, by (status, reason): the serving ConnectionGate's count
        self.http_refusals: Counter[tuple[int, str]] = Counter()
        self.tenancy: Tenancy | None = None  # what each account kind gets, once started
        self.startup_error: Exception | None = None  # why startup failed (ember serve raises it)
        self._housekeeping: asyncio.Task[None] | None = None

    def _ai_routes(self, print_line: Callable[[str], None]) -> list[Any]:
        routes = ai_routes_for(self.plane, self.supervisor.resources)
        if not self.options.log_requests:
            return routes
        if ai_available():
            self._gateway().on_call = self._log_ai_call
        return with_access_log(routes, print_line, self.refusals.line)

    def _log_ai_call(self, call: Any) -> None:
        line = call_line(call, self._account_name)
        if call.code:  # refused or failed: thinned per account (refusal_log.py)
            self.refusals.line(refusal_key(call), line)
        else:
            self.print_line(line)

    def _account_name(self, account_id: str) -> str:
        """An account's name for the log (names never change: kept once read)."""
        name = self._account_names.get(account_id)
        if name is None:
            account = self.plane.accounts.find(account_id)
            name = account.name if account is not None else account_id
            if len(self._account_names) > ACCOUNT_NAMES_KEPT:
                self._account_names.clear()
            self._account_names[account_id] = name
        return name

    def _gateway(self) -> Any:
        from ember.bindings.ai.gateway import shared_gateway

        return shared_gateway(DeploymentHost(self.supervisor.resources, "platform"))

    def _gateway_if_any(self) -> Any | None:
        return self._gateway() if ai_available() else None

    def begin_ai_shutdown(self) -> None:
        """The HTTP drain begins: the model pool serves on but starts no replica again."""
        gateway = self._gateway_if_any()
        if gateway is not None:
            gateway.begin_shutdown()

    def interrupt_ai_streams(self, reason: str) -> int:
        """End the AI streams still open with the usual error event and ``[DONE]`` (the drain
        ran out: cut by uvicorn they would stop mid-event); how many it ended."""
        gateway = self._gateway_if_any()
        return 0 if gateway is None else int(gateway.interrupt(reason))

    def ai_model_ids(self) -> list[str] | None:
        """The ids ``env.AI`` and the AI REST API answer (None: this install has no AI)."""
        gateway = self._gateway_if_any()
        return None if gateway is None else list(gateway.pool.model_ids())

    async def _metrics(self, scope: Scope, send: Any) -> None:
        """The metrics listener answers ``GET /metrics`` and nothing else."""
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["path"] != "/metrics" or scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 404, "This listener serves GET /metrics only.")
            return
        snapshot = Snapshot(
            workers=self.events.workers,
            isolates=self.supervisor.running_isolates(),
            deployments=len(self.routes),
            gateway=self._gateway_if_any(),
            http_refusals=self.http_refusals,
        )
        body = render(snapshot).encode()
        headers = [(b"content-type", CONTENT_TYPE.encode()), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": body if scope["method"] == "GET" else b""}
        )

    def _slot(self, ident: str) -> Any:
        return self.live.slot(ident)

    def _call_refusal(self, ident: str) -> str | None:
        """Why a slot's binding calls are refused (its account expired), asked per call: the
        slot id starts with the account's id (``translate.slot_id``)."""
        return self.expiry.refusal(ident.partition(":")[0])

    def _anonymous(self) -> str | None:
        """Why temporary (anonymous) accounts are refused here; None when they are accepted."""
        status = self.supervisor.sandbox_status()
        if status.report is None or status.policy.allow_below_minimum:
            return None
        minimum = status.report.minimum()
        if minimum.met:
            return None
        return (
            f"the worker sandbox on this machine lacks the minimum for anonymous code "
            f"({minimum.explanation}); see `ember doctor`"
        )

    # -- ASGI -----------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if (
            self.metrics_port is not None
            and scope.get("server", (None, None))[1] == self.metrics_port
        ):
            await self._metrics(scope, send)
            return
        target = self._worker_of(scope)
        if target is None:
            await self.api(scope, receive, send)
            return
        account_name, worker, inner, shared = target
        if kind != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        if shared:  # named by its /w/ path: the origin every tenant shares (shared_origin.py)
            send = guarded_send(send, inner["root_path"], self.print_line)
            if service_worker_script(scope["headers"]):
                host_named = self.worker_urls(account_name, worker)[0]
                await _plain(send, 403, service_worker_refusal(host_named))
                return
        route = self.routes.get(account_name, worker)
        if route is None:
            if self.options.log_requests:  # no isolate saw it, so no request event tells of it
                path = inner.get("path") or "/"
                self.print_line(
                    f"{utc_stamp()} {scope['method']} {worker}.{account_name} {path} 404 "
                    "(0.0ms) [not live]"
                )
            await _plain(
                send, 404, f"No worker named {worker!r} is live on account {account_name!r}."
            )
            return
        slot_id = self._pick(route, worker, scope)
        slot = self.live.slot(slot_id)
        if slot is not None and slot.unsupported:
            await _plain(send, 501, f"Worker {worker!r} cannot run on ember: {slot.unsupported}.")
            return
        if slot is not None and slot.assets is not None:
            found = assets_route(inner, slot.assets, await slot.assets.rules.get())
            if found is not None:
                await send_answer(found, send, self._asset_reads)
                return
        inner[SLOT_KEY] = slot_id
        client = scope.get("client")
        if client:
            inner["headers"] = [
                *[(k, v) for k, v in scope["headers"] if k != b"cf-connecting-ip"],
                (b"cf-connecting-ip", str(client[0]).encode()),
            ]
        await self.router(inner, receive, send)

    def _pick(self, route: WorkerRoute, worker: str, scope: Scope) -> str:
        """The version slot for one request: the one the version-overrides header pins, if it
        is in the deployment; else chosen by the deployment's percentages."""
        pinned = pinned_version(scope["headers"], worker)
        if pinned is not None:
            for ident, _ in route.targets:
                slot = self.live.slot(ident)
                if slot is not None and slot.version_id == pinned:
                    return ident
        return route.pick()

    def _worker_of(self, scope: Scope) -> tuple[str, str, Scope, bool] | None:
        """(account, worker, the worker's scope, whether named by the shared /w/ path)."""
        named = worker_of_host(host_header(scope))
        if named is not None:
            return named[0], named[1], dict(scope), False
        by_path = split_worker_path(scope) if scope["type"] == "http" else None
        return None if by_path is None else (*by_path, True)

    # -- what goes live -------------------------------------------------------------------------

    def worker_urls(self, account_name: str, worker: str) -> list[str]:
        """The URLs a person can open: by host name, and by path."""
        origin = self.plane.config.public_url or self.origin or "http://127.0.0.1:8787"
        scheme, _, netloc = origin.partition("://")
        port = netloc.rsplit(":", 1)[1] if ":" in netloc.rsplit("]", 1)[-1] else ""
        suffix = f":{port}" if port else ""
        return [
            f"{scheme}://{worker}.{account_name}.localhost{suffix}/",
            f"{origin}/w/{account_name}/{worker}/",
        ]

    def _changed(self, change: LiveChange) -> None:
        name = f"{change.script_name} (account {change.account_name})"
        if not change.slots:
            self.print_line(f"[ember] no longer live: {name}")
        else:
            versions = ", ".join(
                f"v{slot.version_number} {slot.version_id[:8]}"
                + (f" {pct:g}%" if len(change.slots) > 1 else "")
                for slot, pct in zip(change.slots, change.percentages, strict=True)
            )
            urls = "  ".join(self.worker_urls(change.account_name, change.script_name))
            self.print_line(f"[ember] live: {name} {versions}  {urls}")
        if change.slots:
            self.crons.refresh(change.slots[0].account_id, change.script_name)


async def _plain(send: Any, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain;charset=UTF-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
