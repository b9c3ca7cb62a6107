"""``ember accounts create/list`` (operators): accounts in a platform's state directory.

Runs on the platform's machine against its SQLite file directly (safe while ``ember serve``
runs: WAL and a busy timeout), and prints a new account's first API token once.
"""

from __future__ import annotations

from pathlib import Path

import click

from ember.runtime.deployments.config import default_state_dir
from ember.runtime.deployments.plane import ControlPlane

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
def create(name: str, state_dir: Path | None) -> None:
    """Create permanent account NAME and print its API token."""
    plane = ControlPlane(state_dir or default_state_dir())
    try:
        account, issued = plane.accounts.create_permanent(name)
    finally:
        plane.close()
    click.echo(f"Created account {account.name} ({account.id}).")
    click.echo(f"API token (shown once): {issued.token}")
    click.echo(f"Log in with: ember login --token {issued.token}")


@accounts.command("list")
@state_option
def list_accounts(state_dir: Path | None) -> None:
    """List the accounts, temporary ones with their expiry."""
    plane = ControlPlane(state_dir or default_state_dir())
    try:
        for account in plane.accounts.list():
            expiry = f" expires {account.expires_at:.0f}" if account.expires_at else ""
            click.echo(f"{account.id}  {account.name}  {account.kind}{expiry}")
    finally:
        plane.close()
