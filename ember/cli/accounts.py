"""``ember accounts create/list`` (operators): accounts in a platform's state directory.

Runs on the platform's machine against its SQLite file directly (safe while ``ember serve``
runs: WAL and a busy timeout), and prints a new account's first API token once.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from ember.cli.credentials import distance
from ember.cli.failure import json_option
from ember.runtime.deployments.config import default_state_dir
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.platform.state_lock import served_origin

state_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The platform's state directory (default: $EMBER_STATE_DIR, else "
    "$XDG_DATA_HOME/ember/platform).",
)


@click.group()
def accounts() -> None:
    """Create and list the accounts of a platform (operator command)."""


@accounts.command("create")
@click.argument("name")
@state_option
@json_option("Print {id, name, token, platform} as JSON (platform: null when not known).")
def create(name: str, state_dir: Path | None, as_json: bool) -> None:
    """Create permanent account NAME and print its API token."""
    state = state_dir or default_state_dir()
    plane = ControlPlane(state)
    try:
        account, issued = plane.accounts.create_permanent(name)
    finally:
        plane.close()
    if as_json:
        served = served_origin(state)
        result = {"id": account.id, "name": account.name, "token": issued.token}
        click.echo(json.dumps(result | {"platform": served.url if served else None}, indent=2))
        return
    click.echo(f"Created account {account.name} ({account.id}).")
    click.echo(f"API token (shown once): {issued.token}")
    served = served_origin(state)
    url = served.url if served is not None else "URL"
    click.echo(f"Log in with: ember login --platform {url} --token {issued.token}")
    if served is None:
        click.echo(
            "  URL: where ember serve listens (http://127.0.0.1:8787 unless its --ip/--port "
            "or platform.public_url say otherwise)"
        )
    elif not served.running:
        click.echo(f"  ({url} is where ember serve last listened on this state directory)")


@accounts.command("list")
@state_option
def list_accounts(state_dir: Path | None) -> None:
    """List the accounts, temporary ones with their expiry (UTC) and the time left."""
    plane = ControlPlane(state_dir or default_state_dir())
    try:
        now = time.time()
        for account in plane.accounts.list():
            expiry = f"  {_expiry(account.expires_at, now)}" if account.expires_at else ""
            click.echo(f"{account.id}  {account.name}  {account.kind}{expiry}")
    finally:
        plane.close()


def _expiry(expires_at: float, now: float) -> str:
    at = datetime.fromtimestamp(expires_at, UTC).isoformat(timespec="seconds")
    at = at.replace("+00:00", "Z")
    if expires_at > now:
        return f"expires {at} (in {distance(expires_at - now)})"
    return f"expired {at} ({distance(now - expires_at)} ago; deleted at the next sweep)"
