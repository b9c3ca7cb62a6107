"""``ember dev``: one deployment from a project directory, served by uvicorn, reloaded on change.

The supervisor does the work; this module adds what is specific to development: reading the
project (config errors at start are fatal, after a change they are reported and the running
version keeps serving), staging the worker's modules (the files a deploy would upload, copied
to a temporary directory the worker runs from, as ``wrangler dev`` runs a Python Worker from
its temporary directory: a file the module rules leave out is not there to import or read),
watching the files a reload reads (``dev_watch.py``; a change starts the new version's
isolate, switches to it, and drains the old one, so in-flight requests finish on the code they
started with; a request that arrives after a save waits for that reload, ``reload_gate.py``),
running crons on schedule, and the dev error pages (``Supervisor(dev=True)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import sys
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.bindings.assets.files import AssetDirectory
from ember.bindings.assets.rule_source import LiveRules
from ember.bindings.assets.serving import route
from ember.bindings.assets.spec import KIND as ASSETS_KIND
from ember.bindings.base import HttpMount
from ember.bindings.registry import BindingRegistry, default_registry
from ember.config import ProjectConfig, load_project
from ember.errors import ConfigError
from ember.listen import bind
from ember.python_project import read_python_project
from ember.requires_python import python_mismatch
from ember.runtime import events as E
from ember.runtime.assets_front import AssetSite, with_assets
from ember.runtime.deployment import Deployment, deployment_from_project
from ember.runtime.dev_stage import DevStage, remove_orphaned_stages
from ember.runtime.dev_state import STATE_DIR
from ember.runtime.dev_watch import dev_watch_list
from ember.runtime.http import ResponseAborted
from ember.runtime.mounts import MountTable, binding_mounts, with_binding_mounts
from ember.runtime.project_check import assets_prefix, check_project
from ember.runtime.reload_gate import ReloadGate
from ember.runtime.router import Router
from ember.runtime.scheduler import CronScheduler
from ember.runtime.services import DeploymentHost
from ember.runtime.spawner import SpawnerConfig
from ember.runtime.supervisor import Supervisor
from ember.runtime.watcher import FileWatcher
from ember.runtime.worker_modules import left_out_notes

if TYPE_CHECKING:  # (imported when serving: ember dev's start does not wait for it)
    from ember.runtime.connguard import ConnectionLimits

# How long a stopping ``ember dev`` lets requests in flight finish (``wrangler dev`` cuts them at
# once; a moment lets a response being written go out whole).
STOP_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class DevOptions:
    """``ember dev``'s flags."""

    project: Path
    env: str | None = None  # the config's [env.NAME] to run; None: the top level
    ip: str | None = None
    port: int | None = None
    persist_to: Path | None = None
    test_scheduled: bool = False
    extra_vars: Mapping[str, str] = field(default_factory=dict)
    watch: bool = True
    run_crons: bool = True
    watch_interval: float = 0.25
    spawner: SpawnerConfig | None = None
    registry: BindingRegistry | None = None
    # The task-free HTTP path for the usual request (fasthttp.py); off: uvicorn's own protocol.
    fast_http: bool = True
    # With an ``ai`` binding, ember answers /ai/v1/* and /client/v4/accounts/*/ai/* itself (the
    # platform's AI APIs); off: those paths go to the worker, as they do once it is deployed.
    ai_routes: bool = True
    # The request-head and body deadlines and connection caps (connguard.py); None: ember
    # serve's defaults (no flag sets them: tests shorten them).
    limits: ConnectionLimits | None = None


class DevServer:
    """One ``ember dev`` session."""

    def __init__(self, options: DevOptions, events: E.EventSink) -> None:
        self.options = options
        self.events = events
        # Removed when the session ends, like wrangler's tmp dir: on the server's shutdown path
        # (``_shutdown``), since uvicorn ends a SIGTERM by re-raising it with the default
        # handler, which exits without running finalizers or atexit; the finalizer covers a
        # session that never served (a config error at start).
        # A session killed before it could remove its stage left it behind: remove those first.
        remove_orphaned_stages()
        stage = DevStage.create()
        self.stage = stage.code
        self._remove_stage = weakref.finalize(self, stage.remove)
        self.config: ProjectConfig = load_project(
            options.project, env=options.env, extra_vars=options.extra_vars
        )
        # Before the modules are staged: an edit made while they are copied is a change.
        self._watcher = (
            FileWatcher(functools.partial(dev_watch_list, self.config)) if options.watch else None
        )
        self.deployment: Deployment
        self._assets: AssetSite | None
        self.deployment, self._assets = self._deployment(self.config)
        self.url: str | None = None
        self.supervisor: Supervisor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._crons: asyncio.Task[None] | None = None
        self._mounts = MountTable()
        self._on_reload: Callable[[DevServer], None] | None = None
        self._gate: ReloadGate | None = None  # with --watch, once started
        self._listener: socket.socket | None = None  # bound by listen(), before serve()

    @property
    def assets(self) -> AssetSite | None:
        """The assets in front of the worker now (None: the config has none)."""
        return self._assets

    @property
    def warnings(self) -> list[str]:
        """Config warnings, including sections no binding type claims (as a deploy shows), the
        folder links left out as walked under another name (as a deploy names them), and a
        ``requires-python`` that excludes the interpreter workers run on here."""
        warnings = list(check_project(self.config, self.options.registry).warnings)
        python = python_mismatch(read_python_project(self.config.root).requires_python)
        return [*warnings, *left_out_notes(self.config), *([python] if python else [])]

    @property
    def state_dir(self) -> Path:
        """Where KV data lives (``--persist-to``, default ``.ember/state`` in the project)."""
        return self.options.persist_to or self.config.root / STATE_DIR

    def _deployment(self, config: ProjectConfig) -> tuple[Deployment, AssetSite | None]:
        deployment = deployment_from_project(
            config, deployment_id=config.name, registry=self.options.registry, stage=self.stage
        )
        return _with_live_assets(deployment, self._asset_warning)

    async def serve(
        self,
        on_ready: Callable[[str], None] | None = None,
        on_reload: Callable[[DevServer], None] | None = None,
    ) -> None:
        """Serve until cancelled (or until uvicorn is told to exit by a signal).

        ``on_reload(self)`` runs after a config or code change was applied (the CLI prints the
        bindings table again there, as ``wrangler dev`` does)."""
        import uvicorn

        from ember.runtime.connguard import (
            ConnectionGate,
            ConnectionLimits,
            RateLimitedLog,
            accept_error_handler,
        )
        from ember.runtime.fasthttp import fast_protocol
        from ember.runtime.httphead import BoundedHeadProtocol

        host, _ = self._address()
        listener = self._listener or self.listen()  # first: a taken port fails before anything
        self._listener = None  # (closed below when serving ends)
        supervisor = Supervisor(
            state_dir=self.state_dir,
            events=self.events,
            registry=self.options.registry,
            spawner=self.options.spawner,
            dev=True,
        )
        self.supervisor = supervisor
        self._on_reload = on_reload
        router = Router(
            supervisor,
            lambda scope: self.deployment.id,
            test_scheduled=self.options.test_scheduled,
            trigger_handlers=True,  # Miniflare's scheduled paths, on in every wrangler dev
            on_startup=self._startup,
            on_shutdown=self._shutdown,
            pending=self._pending,
        )
        self._mounts.replace(self._binding_mounts(self.deployment))
        # httptools (uvicorn's default where installed) with the request head bounded: a head
        # past 128 KiB is refused with 431 before it could reach (and kill) the isolate, one
        # slower than 60 s is closed (408), and connections are capped as ember serve's are by
        # default (runtime/connguard.py): a dev server on --ip 0.0.0.0 meets the same clients.
        loop = asyncio.get_running_loop()
        log = RateLimitedLog(_say_dev, loop.call_later)
        loop.set_exception_handler(accept_error_handler(log, loop.get_exception_handler()))
        gate = ConnectionGate(self.options.limits or ConnectionLimits(), log)
        http: Any = functools.partial(BoundedHeadProtocol, gate=gate)
        if self.options.fast_http:
            http = (
                fast_protocol(
                    router,
                    lambda: self.deployment.id,
                    lambda path: self._mounts.matches(path) or self._assets_claim(path),
                    stale=self._stale,
                    gate=gate,
                )
                or http
            )
        config = uvicorn.Config(
            with_binding_mounts(with_assets(router, lambda scope: self._assets), self._mounts),
            http=http,
            host=host,
            port=listener.getsockname()[1],
            lifespan="on",
            log_level="warning",
            access_log=False,
            ws="none",
            proxy_headers=False,  # a local dev server: no proxy in front, no headers to trust
            server_header=False,  # workerd (wrangler dev) sends none: the worker's, if any
            timeout_keep_alive=gate.limits.keepalive_timeout_s,
            # On SIGTERM or Ctrl-C, requests still running (a held one waiting for a reload, a
            # handler that never returns, a long AI stream) are cut after this: without it
            # uvicorn waits for them all, and ember dev outlived a SIGTERM for minutes.
            timeout_graceful_shutdown=STOP_GRACE_S,
        )
        logging.getLogger("uvicorn.error").addFilter(_drop_aborted_responses)
        server = uvicorn.Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[listener]))
        try:
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            if server.started:
                bound_host, bound_port = listener.getsockname()[:2]
                self.url = f"http://{bound_host}:{bound_port}"
                if on_ready is not None:
                    on_ready(self.url)
            await serving
        finally:
            if not serving.done():
                server.should_exit = True
                with contextlib.suppress(BaseException):
                    await serving
            listener.close()

    def listen(self) -> socket.socket:
        """Bind the address now (``serve`` uses this socket): the CLI calls it before printing
        anything, so a taken port is the one line it prints, as in wrangler."""
        if self._listener is None:
            self._listener = bind(*self._address())
        return self._listener

    def _address(self) -> tuple[str, int]:
        host = self.options.ip or self.config.dev.ip
        port = self.options.port if self.options.port is not None else self.config.dev.port
        return host, port

    def _asset_warning(self, note: str) -> None:
        message = assets_prefix(self.config) + note
        self.events.emit(E.LifecycleEvent(self.deployment.id, "warn", message))

    def _assets_claim(self, path: str) -> bool:
        """Whether the assets may answer ``path`` (the fast path then leaves it to ASGI)."""
        site = self._assets
        if site is None:
            return False
        if site.claims_all() or "%" in path:
            return True
        rules = site.rules.now()
        if rules is None:  # being compiled: the ASGI path waits for them
            return True
        return route("GET", path, "", {}, site.policy, site.lookup, rules) is not None

    def _binding_mounts(self, deployment: Deployment) -> list[HttpMount]:
        assert self.supervisor is not None  # invariant: made in serve() before this is called
        ai = self.options.ai_routes  # off: the AI paths go to the worker (--no-ai-routes)
        return binding_mounts(
            self.options.registry or default_registry(),
            DeploymentHost(self.supervisor.resources, deployment.id),
            [b for b in deployment.bindings if ai or b.kind != "ai"],
        )

    async def _startup(self) -> None:
        assert self.supervisor is not None  # invariant: set before uvicorn starts
        await self.supervisor.start()
        if self.deployment.main:  # "" for assets only: nothing to run
            await self.supervisor.deploy(self.deployment)
        if self._watcher is not None:
            self._gate = ReloadGate(self._watcher, self._reload)
            self._tasks.append(asyncio.ensure_future(self._gate.poll(self.options.watch_interval)))
        self._restart_crons()

    def _stale(self) -> bool:
        return self._gate is not None and self._gate.stale_in_poll()

    def _pending(self) -> Awaitable[None] | None:
        return self._gate.pending() if self._gate is not None else None

    async def _shutdown(self) -> None:
        for task in [*self._tasks, *([self._crons] if self._crons else [])]:
            task.cancel()
        try:
            if self.supervisor is not None:
                await self.supervisor.close()
        finally:
            self._remove_stage()  # after the isolates that ran from it have stopped

    async def _reload(self, changed: list[Path]) -> None:
        assert self.supervisor is not None  # invariant: the watcher starts after startup
        names = ", ".join(
            str(p.relative_to(self.config.root)) if p.is_relative_to(self.config.root) else str(p)
            for p in changed[:3]
        )
        try:
            config = load_project(
                self.options.project, env=self.options.env, extra_vars=self.options.extra_vars
            )
            if self._watcher is not None:  # the rules may pick other files now
                self._watcher.rescope(functools.partial(dev_watch_list, config))
            deployment, assets = self._deployment(config)
        except ConfigError as exc:
            self.events.emit(
                E.LifecycleEvent(
                    self.deployment.id, "error", f"{exc} (still serving the previous version)"
                )
            )
            return
        self.config, self.deployment, self._assets = config, deployment, assets
        self.events.emit(E.LifecycleEvent(deployment.id, "info", f"{names} changed: reloading"))
        error = await self.supervisor.deploy(deployment) if deployment.main else None
        # The whole config applies, not just the worker's env: a binding's HTTP routes (the AI
        # APIs) follow its section, as the isolate's bindings do.
        self._mounts.replace(self._binding_mounts(deployment))
        if error is None:
            self.events.emit(E.LifecycleEvent(deployment.id, "info", "reloaded"))
        if self._on_reload is not None:
            self._on_reload(self)
        self._restart_crons()

    def _restart_crons(self) -> None:
        if self._crons is not None:
            self._crons.cancel()
            self._crons = None
        if self.options.run_crons and self.deployment.crons:
            supervisor, deployment_id = self.supervisor, self.deployment.id
            assert supervisor is not None  # invariant: called after startup

            async def trigger(cron: str, when: float) -> None:
                await supervisor.scheduled(deployment_id, cron, when)

            self._crons = asyncio.ensure_future(CronScheduler(self.deployment.crons, trigger).run())


def _with_live_assets(
    deployment: Deployment, warn: Callable[[str], None]
) -> tuple[Deployment, AssetSite | None]:
    """The deployment's assets, read live from the project's directory, and the deployment
    with its ``env.ASSETS`` given the same rules: one ``LiveRules``, so an edit compiles once
    for both (``warn``: what an edited ``_redirects`` or ``_headers`` is warned about)."""
    if deployment.assets is None or deployment.assets_dir is None:
        return deployment, None
    policy, directory = deployment.assets, deployment.assets_dir
    rules = LiveRules(directory, policy.html_handling, warn)
    bindings = tuple(
        replace(spec, private={**spec.private, "rules": rules})
        if spec.kind == ASSETS_KIND
        else spec
        for spec in deployment.bindings
    )
    site = AssetSite(policy, AssetDirectory(directory).lookup, rules)
    return replace(deployment, bindings=bindings), site


def _drop_aborted_responses(record: logging.LogRecord) -> bool:
    # A streamed response cut short on purpose (limit, worker failure) is not a server error,
    # nor is a client that left before its body was read (or was cut off at the body's
    # deadline, runtime/bodyclock.py) from a Starlette route (the AI routes, binding mounts).
    # Nor is a request cut when ember dev stops (STOP_GRACE_S): its request line says so, and
    # uvicorn's count of them leaves out the fast path's ("Cancel 0 running task(s)").
    if not record.exc_info:
        return not str(record.msg).startswith("Cancel %s running task(s)")
    from starlette.requests import ClientDisconnect  # (only on an error: ember dev starts without)

    # A request task cancelled is one uvicorn cut when ember dev stopped (nothing else cancels
    # them): a held request waiting for a reload, say.
    cut = ResponseAborted | ClientDisconnect | asyncio.CancelledError
    return not isinstance(record.exc_info[1], cut)


def _say_dev(line: str) -> None:
    sys.stderr.write(f"ember dev: {line}\n")
    sys.stderr.flush()
