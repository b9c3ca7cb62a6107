"""``ember deployments list|status``: a worker's deployments, and the one serving it now.

``list``: newest first, with the worker's local URLs. ``status``: the live deployment as
wrangler's ``deployments status`` prints it (each version's share of traffic), or ``--json``.
``view`` is wrangler's old name, kept (hidden) to say what replaced it.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ember.cli.environment import chosen_env, env_option, show_warnings
from ember.cli.session import name_option, platform_option
from ember.cli.temporary import command_session, temporary_option
from ember.cli.versions_output import deployment_summary, source_label
from ember.cli.worker_project import load_project
from ember.errors import UserError


def worker_name(name: str | None, *, suffix_name: bool = False) -> str:
    """``--name``, else the project's worker name in the chosen environment (``<name>-<env>``).

    ``suffix_name``: ``secret`` and ``tail`` add ``-<env>`` to a name given with ``--env`` (not
    with ``CLOUDFLARE_ENV``), as wrangler's ``getLegacyScriptName`` does; the other commands use
    ``--name`` as it is (``getScriptName``).
    """
    choice = chosen_env()
    if name:
        return f"{name}-{choice.name}" if suffix_name and choice.from_flag and choice.name else name
    project = load_project(Path("."), None, choice.name)
    show_warnings(project.warnings)
    return project.name


@click.group()
def deployments() -> None:
    """Inspect a worker's deployments."""


@deployments.command("list")
@name_option
@env_option
@platform_option
@temporary_option
def list_deployments(name: str | None, platform_url: str | None, temporary: bool) -> None:
    """List the deployments of the worker (newest first)."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        found = session.client.call(
            "GET", session.account_path(f"/workers/scripts/{worker}/deployments")
        )["deployments"]
    finally:
        session.close()
    for index, deployment in enumerate(found):
        annotations = deployment.get("annotations") or {}
        trigger = source_label(str(deployment.get("source", "")), annotations)
        live = "  (live)" if index == 0 else ""
        click.echo(f"{deployment['created_on']}  {deployment['id']}  {trigger}{live}")
        for version in deployment["versions"]:
            click.echo(f"    {version['percentage']:g}%  {version['version_id']}")
        if annotations.get("workers/message"):
            click.echo(f"    message: {annotations['workers/message']}")
    click.echo("URLs:")
    for url in session.worker_urls(worker):
        click.echo(f"  {url}")


@deployments.command("status")
@name_option
@env_option
@platform_option
@temporary_option
@click.option("--json", "as_json", is_flag=True, help="Print the deployment as JSON.")
def status(name: str | None, platform_url: str | None, temporary: bool, as_json: bool) -> None:
    """Show the live deployment: its versions and their share of traffic."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        script = session.account_path(f"/workers/scripts/{worker}")
        found = session.client.call("GET", f"{script}/deployments")["deployments"]
        if not found:
            raise UserError(f"The Worker {worker} has no deployments.")
        live = found[0]
        versions = {
            t["version_id"]: session.client.call("GET", f"{script}/versions/{t['version_id']}")
            for t in ([] if as_json else live["versions"])
        }
    finally:
        session.close()
    if as_json:
        click.echo(json.dumps(live, indent=2))
    else:
        click.echo(deployment_summary(live, versions))


@deployments.command("view", hidden=True)
@click.argument("deployment_id", required=False)
@name_option
@env_option
@platform_option
@temporary_option
def view(
    deployment_id: str | None, name: str | None, platform_url: str | None, temporary: bool
) -> None:
    """Renamed: `ember deployments status`, or `ember versions view VERSION_ID`."""
    if deployment_id is None:
        raise UserError(
            "`ember deployments view` is now `ember deployments status` (as in wrangler); "
            "run that instead"
        )
    raise UserError(
        "`ember deployments view ID` is now `ember versions view VERSION_ID` (as in "
        "wrangler: deployments are of versions, and a version id names what ran)"
    )
