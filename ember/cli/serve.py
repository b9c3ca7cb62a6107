"""``ember serve``: the multi-tenant platform on one port (default 8787).

Workers answer at ``http://<worker>.<account>.localhost:PORT/`` (for browsers: each worker its
own origin) and ``http://127.0.0.1:PORT/w/<account>/<worker>/`` (for clients that cannot send the
name; every tenant shares that origin, so its pages run sandboxed, see
ember/runtime/platform/shared_origin.py); the Cloudflare-compatible control API is at
``/client/v4`` (ember's CLI, wrangler and the cloudflare SDK all use it).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ember.cli.state_dir import resolve_state_dir, state_dir_option

if TYPE_CHECKING:
    from ember.runtime.deployments.config import PlatformConfig

DEFAULT_MODEL = "@cf/zai-org/glm-4.7-flash"  # the README's first model: the id a banner suggests


@click.command()
@click.option("--port", type=int, default=8787, show_default=True, help="Port to listen on.")
@click.option("--ip", default="127.0.0.1", show_default=True, help="Address to listen on.")
@state_dir_option
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="An ember.yaml whose `platform:` section sets TTLs, limits and proof-of-work difficulty "
    "(`server:`: request head and body deadlines, connection caps; `ai:`: the models).",
)
@click.option(
    "--allow-unsandboxed-anonymous",
    is_flag=True,
    help="Accept temporary (anonymous) deployments even if this machine lacks the sandbox "
    "layers they need (see `ember doctor`). Only for machines nobody else can reach.",
)
@click.option(
    "--trusted-workers",
    is_flag=True,
    help="Run workers even if no sandbox layer keeps them out of the state directory (every "
    "account's secrets, KV and code). Only for a single-tenant box: every worker is yours.",
)
@click.option(
    "--disable-sandbox-layers",
    default="",
    metavar="LAYERS",
    help="Comma-separated sandbox layers to leave off (e.g. cgroup), as `ember doctor --disable`.",
)
@click.option(
    "--idle-timeout",
    default="5m",
    show_default=True,
    metavar="DURATION",
    help="Stop a worker's isolate after this long without requests (it restarts on the next).",
)
@click.option(
    "--log-requests",
    is_flag=True,
    help="Print one line per request to a worker, and per call to the AI HTTP API.",
)
@click.option(
    "--metrics-port",
    type=int,
    default=None,
    help="Serve Prometheus metrics (GET /metrics) on this port, apart from the tenants' port.",
)
@click.option(
    "--metrics-ip",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics listener binds.",
)
@click.option(
    "--compact",
    is_flag=True,
    help="Rewrite the state directory's databases (SQLite VACUUM) before serving: returns all "
    "free space and drops every trace of deleted data. Takes as long as copying them.",
)
@click.option("--port-file", type=click.Path(dir_okay=False, path_type=Path), hidden=True)
@click.option("--gc-interval", type=float, default=30.0, hidden=True)
@click.option("--housekeeping-interval", type=float, default=5.0, hidden=True)
# Each SQLite store capped at N pages (at least its size at start): a full disk for tests.
@click.option("--storage-max-pages", type=click.IntRange(min=1), default=None, hidden=True)
def serve(
    port: int,
    ip: str,
    state_dir: Path | None,
    config_file: Path | None,
    allow_unsandboxed_anonymous: bool,
    trusted_workers: bool,
    disable_sandbox_layers: str,
    idle_timeout: str,
    log_requests: bool,
    metrics_port: int | None,
    metrics_ip: str,
    compact: bool,
    port_file: Path | None,
    gc_interval: float,
    housekeeping_interval: float,
    storage_max_pages: int | None,
) -> None:
    """Run the ember platform: workers of many accounts, and the deploy API, on one port."""
    from ember import heap
    from ember.errors import ConfigError
    from ember.runtime.deployments.config import (
        PlatformConfig,
        load_platform_config,
        parse_duration,
    )
    from ember.runtime.isolation import SandboxPolicy
    from ember.runtime.platform.app import Platform, PlatformOptions
    from ember.runtime.platform.server import serve as run_server
    from ember.runtime.platform.state_lock import exposure_warning, lock_state_dir
    from ember.runtime.sandbox import FULL, parse_layers

    idle = parse_duration(idle_timeout)
    if idle is None:
        raise ConfigError("--idle-timeout", None, idle_timeout, "a duration such as 90s or 5m")
    config = load_platform_config(config_file) if config_file else PlatformConfig()
    ai = _ai_settings(config_file) if config_file else None
    limits = _server_limits(config_file)
    state = resolve_state_dir(state_dir)
    held = lock_state_dir(state)  # held until this process ends (see state_lock.py)
    exposed = exposure_warning(state)
    if exposed:
        click.secho(exposed, fg="yellow", err=True)
    policy = SandboxPolicy(
        default_profile=FULL,
        allow_below_minimum=allow_unsandboxed_anonymous,
        disabled=parse_layers(disable_sandbox_layers, source="--disable-sandbox-layers"),
    )
    options = PlatformOptions(
        state_dir=state,
        config=config,
        idle_timeout_s=float(idle),
        log_requests=log_requests,
        sandbox=policy,
        ai=ai,
        gc_interval_s=gc_interval,
        housekeeping_s=housekeeping_interval,
        storage_max_pages=storage_max_pages,
        trusted_workers=trusted_workers,
        compact=compact,
    )
    platform = Platform(options, print_line=_print)
    click.echo(f"ember serve: state in {state}")

    def ready(origin: str) -> None:
        # For `ember accounts create`'s login line: the URL users reach this platform at.
        held.record_origin(platform.plane.config.public_url or origin)
        for line in platform.supervisor.sandbox_status().lines():
            click.echo(line)
        tenancy = platform.tenancy
        for index, line in enumerate(tenancy.lines() if tenancy is not None else []):
            # The operator's opt-out (--trusted-workers, on the first line) must not scroll by.
            loud = index == 0 and tenancy is not None and tenancy.unwalled
            click.secho(line, fg="red" if loud else None, bold=loud)
        click.echo(
            f"isolates: at most {platform.supervisor.cap.limit} live (platform.max_isolates); "
            "at the cap the least recently used idle one is stopped for a new one, else 503"
        )
        click.echo(_shares_line(platform.plane.config, platform.supervisor.cap.limit))
        click.echo(limits.line())
        click.echo(platform.plane.temporary_total.line())
        click.secho(f"Ready on {origin}  (control API: {origin}/client/v4)", fg="green")
        by_name, by_path = platform.worker_urls("<account>", "<worker>")
        click.echo(f"Workers: {by_name} for browsers (each worker its own origin);")
        click.echo(f"  {by_path} for clients that cannot send the name (pages there are sandboxed)")
        click.echo(_ai_line(platform.ai_model_ids(), config_file))
        if platform.metrics_port is not None:
            click.echo(f"Metrics on http://{metrics_ip}:{platform.metrics_port}/metrics")
        routes = list(platform.routes)
        if routes:
            click.echo(f"{len(routes)} live deployment(s):")
        for route in routes:
            urls = "  ".join(platform.worker_urls(route.account_name, route.script_name))
            click.echo(f"  {route.script_name} (account {route.account_name})  {urls}")
        sys.stdout.flush()

    heap.tune_for_serving()  # per-request objects die young (see ember/heap.py)
    try:
        asyncio.run(
            run_server(
                platform,
                ip,
                port,
                port_file=port_file,
                on_ready=ready,
                drain_timeout_s=_drain_timeout(ai),
                say=_print,
                metrics=(metrics_ip, metrics_port) if metrics_port is not None else None,
                limits=limits,
            )
        )
    except KeyboardInterrupt:
        pass  # Ctrl-C: uvicorn already shut the platform down
    finally:
        held.release()


def _ai_line(served: list[str] | None, config_file: Path | None) -> str:
    """Which models the tenants' ``env.AI`` reaches; with none, the smallest config that adds
    one (a catalog id needs no checkpoint: ember runs its shipped one)."""
    if served is None:
        return "AI models: none (this install has no AI: env.AI.run is unavailable)"
    if served:
        return f"AI models: {', '.join(served)}"
    section = f'ai: {{models: {{"{DEFAULT_MODEL}": {{}}}}}}'
    how = (
        f"add {section} to {config_file}"
        if config_file
        else f"start with --config FILE holding {section}"
    )
    return (
        f"AI models: none (env.AI.run answers 5007): to serve one, {how} (`ember ai models` "
        "lists ember's catalog; an id it lacks also needs checkpoint: DIR)"
    )


def _drain_timeout(ai: object | None) -> float:
    """The pool's ``drain_timeout_s``, also uvicorn's graceful-shutdown bound on SIGTERM: the
    requests in flight get it, then the pool's own drain (what is left: queued batches) gets it
    again, so a stop takes at most twice it."""
    from ember.runtime.platform.server import DEFAULT_DRAIN_TIMEOUT_S

    pool = getattr(ai, "pool", None)
    return float(pool.settings.drain_timeout_s) if pool is not None else DEFAULT_DRAIN_TIMEOUT_S


def _server_limits(config_file: Path | None) -> Any:
    """The ``server:`` section (request head and body deadlines, keep-alive, connection caps)."""
    from ember.config_yaml import load_yaml
    from ember.runtime.connguard import ConnectionLimits, parse_connection_limits

    if config_file is None:
        return ConnectionLimits()
    text = config_file.read_text(encoding="utf-8", errors="replace")
    document = load_yaml(text, str(config_file))
    section = document.get("server") if isinstance(document, dict) else None
    return parse_connection_limits(section, str(config_file))


def _ai_settings(config_file: Path) -> Any:
    """The ``ai:`` section of the operator's config (models, pool, limits) as a GatewayConfig."""
    from ember.config_yaml import load_yaml
    from ember.errors import ConfigError
    from ember.runtime.platform.ai import ai_available

    text = config_file.read_text(encoding="utf-8", errors="replace")
    document = load_yaml(text, str(config_file))
    if not isinstance(document, dict):
        raise ConfigError(str(config_file), None, type(document).__name__, "a mapping of keys")
    section = document.get("ai")
    if section is None or not ai_available():
        return None
    if not isinstance(section, dict):
        raise ConfigError(str(config_file), "ai", section, "a mapping of models, pool, limits")
    if "binding" in section:
        # A project's section (``ai: {binding: AI, models: ...}``, docs/ai-pool.md) pasted here: the
        # name is each deployment's to choose (its own ai binding), so it means nothing here.
        click.echo(
            f"ember serve: {config_file}: ai.binding is ignored here: each deployment names its "
            "own AI binding; this section configures the models they share",
            err=True,
        )
        section = {k: v for k, v in section.items() if k != "binding"}
    unknown = sorted(set(section) - {"models", "pool", "limits"})
    if unknown:
        raise ConfigError(
            str(config_file), f"ai.{unknown[0]}", unknown[0], "models, pool or limits"
        )
    from ember.bindings.ai.spec import gateway_config

    config = gateway_config(section, str(config_file))
    _check_served_ids(config.pool, str(config_file))
    return config


def _check_served_ids(pool: Any, file: str) -> None:
    """Every configured id must be one ember can serve: a catalog id, an id given a checkpoint,
    or one answered by attached URLs only (refused here rather than when the pool starts it)."""
    from ember.errors import ConfigError
    from ember.models.catalog import default_catalog

    catalog = default_catalog()
    for model_id, serving in pool.models.items():
        if model_id in catalog or serving.checkpoint is not None:
            continue
        if all(replica.url for replica in serving.replicas):
            continue
        raise ConfigError(
            file,
            f'ai.models."{model_id}"',
            model_id,
            "a model id of ember's catalog (`ember ai models` lists them)",
            hint=f"to serve {model_id} from a checkpoint directory, add checkpoint: <directory> "
            "under it; to attach a running server, url: http://HOST:PORT (an sglang replica's "
            "model_path serves catalog ids only: ember takes the tool and reasoning parsers "
            "from the catalog or the checkpoint)",
        )


def _print(line: str) -> None:
    click.echo(line)
    sys.stdout.flush()


def _shares_line(config: PlatformConfig, cap: int | None) -> str:
    """The isolates each account kind may hold (``platform.*.isolate_share`` of the cap)."""
    from ember.runtime.capacity import share_of

    def held(share: float | None) -> str:
        return "all" if share is None or cap is None else str(share_of(share, cap))

    temporary = config.temporary
    return (
        f"isolate shares: a permanent account at most {held(config.accounts.isolate_share)}, "
        f"a temporary one {held(temporary.isolate_share)}, temporary accounts together "
        f"{held(temporary.total_isolate_share)} (platform.accounts.isolate_share, "
        "platform.temporary.isolate_share, platform.temporary.total_isolate_share); past its "
        "share an account's least recently used idle isolate is stopped for its new one, else 503"
    )
