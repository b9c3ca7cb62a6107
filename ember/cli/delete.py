"""``ember delete``: delete a worker with all its versions, deployments and secrets."""

from __future__ import annotations

import click

from ember.cli.deployments import worker_name
from ember.cli.environment import env_option
from ember.cli.prompts import confirm
from ember.cli.session import name_option, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option


@click.command()
@name_option
@env_option
@platform_option
@temporary_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def delete(name: str | None, platform_url: str | None, temporary: bool, yes: bool) -> None:
    """Delete the worker (its KV namespaces stay: they belong to the account)."""
    worker = worker_name(name)
    if not yes:
        if not confirm(f"Delete Worker {worker!r} and all its versions?"):
            raise click.Abort()
    session = command_session(platform_url, temporary)
    try:
        session.client.call(
            "DELETE", session.account_path(f"/workers/services/{path_segment(worker)}")
        )
    finally:
        session.close()
    click.echo(f"Successfully deleted {worker}")  # wrangler's line (src/delete.ts)
