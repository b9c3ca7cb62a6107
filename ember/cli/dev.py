"""``ember dev``: run a worker locally, reload it on change, print its requests and output."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import click

from ember.cli.environment import chosen_env, env_option
from ember.cli.upload_options import ArrayOption, parse_vars

FLUSH_EVERY_S = 0.02  # request log lines reach the terminal at most this late
# A request line shows at most this much of its target (path and query): a 16 KB URL would
# otherwise fill the terminal once per request. Its full length is told after the cut.
TARGET_SHOWN = 300


@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
@env_option
@click.option("--port", type=int, help="Port to listen on (default 8787, or dev.port).")
@click.option("--ip", help="Address to listen on (default 127.0.0.1, or dev.ip).")
@click.option(
    "--persist-to",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for local state such as KV (default DIR/.ember/state).",
)
@click.option(
    "--test-scheduled",
    is_flag=True,
    help="Also expose wrangler's /__scheduled?cron=... (Miniflare's /cdn-cgi/handler/scheduled "
    "and /cdn-cgi/local/scheduled run crons without it).",
)
@click.option(
    "--var",
    "vars_",
    cls=ArrayOption,
    multiple=True,
    metavar="KEY:VALUE",
    help="Add or override a var (repeatable).",
)
@click.option("--no-watch", is_flag=True, help="Do not reload when files change.")
@click.option("--no-crons", is_flag=True, help="Do not run triggers.crons on their schedule.")
@click.option(
    "--no-fast-http",
    is_flag=True,
    help="Serve every request through uvicorn's ASGI path (the HTTP fast path's reference).",
)
@click.option(
    "--no-ai-routes",
    is_flag=True,
    help="Send /ai/v1/* and /client/v4/accounts/*/ai/* to the worker instead of answering them "
    "with ember's AI APIs (as they reach the worker once deployed).",
)
def dev(
    directory: Path,
    port: int | None,
    ip: str | None,
    persist_to: Path | None,
    test_scheduled: bool,
    vars_: tuple[str, ...],
    no_watch: bool,
    no_crons: bool,
    no_fast_http: bool,
    no_ai_routes: bool,
) -> None:
    """Serve the worker in DIRECTORY on http://127.0.0.1:8787, reloading on change."""
    from ember import heap
    from ember.runtime import loop as event_loop
    from ember.runtime.devserver import DevOptions, DevServer

    options = DevOptions(
        project=directory,
        env=chosen_env().name,
        ip=ip,
        port=port,
        persist_to=persist_to,
        test_scheduled=test_scheduled,
        extra_vars=parse_vars(vars_),
        watch=not no_watch,
        run_crons=not no_crons,
        fast_http=not no_fast_http,
        ai_routes=not no_ai_routes,
    )
    sink = TerminalSink()
    server = DevServer(options, sink)
    server.listen()  # a taken port is the only line printed, as in wrangler
    for warning in server.warnings:
        click.secho(f"▲ {warning}", fg="yellow", err=True)
    _banner(server)

    def ready(url: str) -> None:
        click.secho(f"Ready on {url}", fg="green")

    def reloaded(server: DevServer) -> None:
        # wrangler dev prints "Your worker has access to..." again after a config change.
        sink.flush()
        for warning in server.warnings:
            click.secho(f"▲ {warning}", fg="yellow", err=True)
        _bindings(server)

    heap.tune_for_serving()  # per-request objects die young (see ember/heap.py)
    try:  # uvloop where installed, as uvicorn's own default would pick (see runtime/loop.py)
        event_loop.run(server.serve(on_ready=ready, on_reload=reloaded))
    except KeyboardInterrupt:
        pass  # Ctrl-C: uvicorn already shut down cleanly and re-raised the signal
    finally:
        sink.flush()  # request lines of the last FLUSH_EVERY_S


def _banner(server: object) -> None:
    from ember.runtime.devserver import DevServer

    assert isinstance(server, DevServer)  # invariant: called with the server just made
    deployment = server.deployment
    click.echo(f"ember dev: {deployment.name} ({deployment.main or 'assets only'})")
    if server.config.assets is not None:
        click.echo(f"Assets: {server.config.assets.directory}")
    if server.config.env is not None:
        click.echo(f"Using environment {server.config.env!r} ([env.{server.config.env}])")
    _bindings(server)
    click.echo(f"State: {server.state_dir}")


def _bindings(server: object) -> None:
    """The bindings table (printed at start and after each reload)."""
    from ember.runtime.devserver import DevServer

    assert isinstance(server, DevServer)  # invariant: called with the running server
    deployment = server.deployment
    secrets_from = ", ".join(p.name for p in server.config.secrets_files) or ".dev.vars"
    rows = [(f"env.{b.name}", b.kind) for b in deployment.bindings]
    rows += [(f"env.{name}", f"var {value!r}"[:60]) for name, value in deployment.vars.items()]
    rows += [(f"env.{name}", f"secret ({secrets_from})") for name in deployment.secrets]
    if rows:
        click.echo("Your worker has access to the following bindings:")
        width = max(len(name) for name, _ in rows)
        for name, what in rows:
            click.echo(f"  {name.ljust(width)}  {what}")
    for cron in deployment.crons:
        click.echo(f"  cron      {cron}")


class TerminalSink:
    """Prints runtime events the way ``wrangler dev`` does: one line per request, raw output."""

    def __init__(self) -> None:
        from ember.runtime import events

        self._events = events
        self._color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        self._flush_scheduled = False
        # Request lines not yet written. Kept here rather than in sys.stdout's buffer, which
        # writes every line through when stdout is unbuffered (PYTHONUNBUFFERED=1, python -u):
        # a write syscall per request on the server's hot path.
        self._lines: list[str] = []

    def _flush_soon(self) -> None:
        # Request lines are written together, at most FLUSH_EVERY_S late: under load that is one
        # write syscall per many requests instead of one per request.
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_later(FLUSH_EVERY_S, self.flush)

    def flush(self) -> None:
        """Write the pending request lines now (in one write) and flush stdout."""
        self._flush_scheduled = False
        if self._lines:
            lines, self._lines = self._lines, []
            sys.stdout.write("".join(lines))
        sys.stdout.flush()

    def emit(self, event: object) -> None:
        """Print one event."""
        E = self._events  # noqa: N806 - the module, named as elsewhere

        if isinstance(event, E.RequestEvent):
            # The hot path (one line per request): plain writes, no click styling machinery.
            start = event.url.find("/", event.url.find("//") + 2)
            target = event.url[start:] if start >= 0 else "/"
            if len(target) > TARGET_SHOWN:
                target = f"{target[:TARGET_SHOWN]}… ({len(target)} characters)"
            status = str(event.status)
            if self._color:
                code = 32 if event.status < 400 else 33 if event.status < 500 else 31
                status = f"\x1b[{code}m{status}\x1b[0m"
            note = "" if event.outcome in ("ok", "exception") else f" [{event.outcome}]"
            line = f"{event.method} {target} {status} ({event.duration_ms:.1f}ms){note}\n"
            self._lines.append(line)
            self._flush_soon()
            return
        if self._lines:  # other output goes after the request lines printed before it
            self.flush()
        if isinstance(event, E.ConsoleEvent):
            click.echo(event.message, err=event.level in ("error", "warn"))
        elif isinstance(event, E.ExceptionEvent):
            click.secho(f"✘ {event.message}", fg="red", err=True)
            if event.traceback:
                click.echo(event.traceback.rstrip(), err=True)
        elif isinstance(event, E.ScheduledEvent):
            click.echo(f'scheduled "{event.cron}" {event.outcome} ({event.duration_ms:.1f}ms)')
        elif isinstance(event, E.LifecycleEvent):
            color = {"warn": "yellow", "error": "red"}.get(event.level)
            click.secho(f"[ember] {event.message}", fg=color, err=event.level != "info")
