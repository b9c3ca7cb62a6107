"""``ember tail [WORKER]``: a deployed worker's invocations as they happen.

Speaks what ``wrangler tail`` speaks: ``POST .../tails`` with the filters, a WebSocket to the
URL it returns (subprotocol ``trace-v1``), one message per finished invocation (request, status,
console lines, exceptions, or the cron of a scheduled event); ``DELETE .../tails/{id}`` when done.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from ember.cli.deployments import worker_name
from ember.cli.environment import env_option
from ember.cli.session import Session, path_segment, platform_option, temporary_expired
from ember.cli.temporary import command_session, temporary_option
from ember.errors import UserError

if TYPE_CHECKING:
    from websockets.exceptions import ConnectionClosed as ConnectionClosedError

STATUS_OUTCOMES = {
    "ok": ["ok"],
    "error": ["exception", "exceededCpu", "exceededMemory", "unknown"],
    "canceled": ["canceled"],
}


@click.command()
@click.argument("worker", required=False)
@env_option
@platform_option
@temporary_option
@click.option(
    "--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty", show_default=True
)
@click.option(
    "--status",
    type=click.Choice(sorted(STATUS_OUTCOMES)),
    multiple=True,
    help="Only invocations with this outcome (repeatable).",
)
@click.option("--method", multiple=True, help="Only requests with this HTTP method (repeatable).")
@click.option("--search", help="Only invocations whose logs or exceptions contain this text.")
@click.option("--header", help="Only requests with this header (NAME or NAME:VALUE).")
@click.option("--sampling-rate", type=click.FloatRange(0.0, 1.0), help="Keep this share.")
@click.option("--max-events", type=int, help="Stop after this many events.")
def tail(
    worker: str | None,
    platform_url: str | None,
    temporary: bool,
    fmt: str,
    status: tuple[str, ...],
    method: tuple[str, ...],
    search: str | None,
    header: str | None,
    sampling_rate: float | None,
    max_events: int | None,
) -> None:
    """Stream the live logs of WORKER (default: the project here) until Ctrl-C."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    name = worker_name(worker, suffix_name=True)  # `tail W --env E` tails W-E, as wrangler
    filters = _filters(status, method, search, header, sampling_rate)
    session = command_session(platform_url, temporary)
    path = session.account_path(f"/workers/scripts/{path_segment(name)}/tails")
    created = session.client.call("POST", path, content=json.dumps({"filters": filters}))
    seen = 0
    try:
        click.echo(f"Connected to {name}, waiting for logs...", err=True)
        with connect(created["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
            socket.send(json.dumps({"debug": False}))
            while max_events is None or seen < max_events:
                try:
                    message = socket.recv()
                except ConnectionClosed as exc:
                    raise UserError(_closed_why(name, session, exc)) from None
                event = json.loads(message)
                seen += 1
                click.echo(json.dumps(event, indent=2) if fmt == "json" else pretty(event))
    except KeyboardInterrupt:
        pass
    finally:
        try:
            session.client.call("DELETE", f"{path}/{created['id']}")
        except UserError:
            pass  # the tail may already be gone with its worker
        session.close()


def _closed_why(name: str, session: Session, exc: ConnectionClosedError) -> str:
    """Why the platform closed the tail: the temporary account's expiry when it has passed
    (the platform closes its tails then), else the close frame's reason when it sent one."""
    temporary = session.temporary
    if temporary is not None and not temporary.valid():
        why = temporary_expired(session.platform, temporary).split(": ", 1)[1]
        return f"the tail of {name} ended: {why}"
    frame = exc.rcvd
    reason = f" ({frame.code}: {frame.reason})" if frame is not None and frame.reason else ""
    return f"the tail of {name} was closed by the platform{reason}"


def _filters(
    status: tuple[str, ...],
    method: tuple[str, ...],
    search: str | None,
    header: str | None,
    sampling_rate: float | None,
) -> list[dict[str, Any]]:
    filters: list[dict[str, Any]] = []
    if sampling_rate is not None:
        filters.append({"sampling_rate": sampling_rate})
    if status:
        filters.append({"outcome": [o for s in status for o in STATUS_OUTCOMES[s]]})
    if method:
        filters.append({"method": [m.upper() for m in method]})
    if search:
        filters.append({"query": search})
    if header:
        name, sep, value = header.partition(":")
        filters.append(
            {"header": {"key": name.strip(), **({"query": value.strip()} if sep else {})}}
        )
    return filters


def pretty(event: dict[str, Any]) -> str:
    """One invocation the way wrangler's pretty format shows it."""
    when = datetime.fromtimestamp(event.get("eventTimestamp", 0) / 1000, UTC)
    stamp = when.strftime("%Y-%m-%d %H:%M:%S")
    outcome = str(event.get("outcome", "unknown"))
    detail = event.get("event") or {}
    if "cron" in detail:
        head = f'"{detail["cron"]}" @ {stamp} UTC - {outcome.capitalize()}'
    else:
        request = detail.get("request", {})
        status = (detail.get("response") or {}).get("status")
        head = (
            f"{request.get('method', '?')} {request.get('url', '')} - "
            f"{outcome.capitalize()}{f' ({status})' if status else ''} @ {stamp} UTC"
        )
    lines = [head]
    for log in event.get("logs", []):
        parts = log.get("message", [])
        text = " ".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
        lines.append(f"  ({log.get('level', 'log')}) {text}")
    for exc in event.get("exceptions", []):
        lines.append(f"  ✘ {exc.get('name', 'Error')}: {exc.get('message', '')}")
    return "\n".join(lines)
