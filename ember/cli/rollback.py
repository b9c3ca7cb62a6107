"""``ember rollback [VERSION]``: deploy an earlier version (default: the previous deployment's)."""

from __future__ import annotations

import click

from ember.cli.deployments import worker_name
from ember.cli.environment import env_option
from ember.cli.session import name_option, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option
from ember.cli.versions_deploy import post_deployment
from ember.errors import UserError


@click.command()
@click.argument("version", required=False)
@name_option
@env_option
@platform_option
@temporary_option
@click.option("--message", help="Why: recorded with the rollback.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask when the secrets would change.")
def rollback(
    version: str | None,
    name: str | None,
    platform_url: str | None,
    temporary: bool,
    message: str | None,
    yes: bool,
) -> None:
    """Make VERSION (or the previous deployment's version) live again."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        path = session.account_path(f"/workers/scripts/{path_segment(worker)}/deployments")
        history = session.client.call("GET", path)["deployments"]
        if not history:
            raise UserError(f"Worker {worker!r} has no deployments to roll back")
        live = history[0]["versions"][0]["version_id"] if len(history[0]["versions"]) == 1 else None
        target = version or next(
            (
                d["versions"][0]["version_id"]
                for d in history[1:]
                if len(d["versions"]) == 1 and d["versions"][0]["version_id"] != live
            ),
            None,
        )
        if target is None:
            raise UserError(f"Worker {worker!r} has no earlier version to roll back to")
        post_deployment(session, worker, {target: 100}, message, yes, "Roll back anyway?")
    finally:
        session.close()
    # wrangler's last lines (workers-sdk e2e/deployments.test.ts "rolls back"), which scripts
    # grep: its cli.success line, then the version id as deploy prints it.
    click.echo(f"╰  SUCCESS  Worker Version {target} has been deployed to 100% of traffic.")
    click.echo(f"\nCurrent Version ID: {target}")
