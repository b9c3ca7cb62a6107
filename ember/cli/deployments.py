"""``ember deployments list|status``: a worker's deployments, and the one serving it now.

``list``: every deployment, oldest first, in the blocks wrangler's ``deployments list`` prints
(``status``'s, one per deployment; workers-sdk ``versions/deployments/list.ts``), the worker's
local URLs on stderr. ``status``: the live deployment as wrangler's ``deployments status`` prints
it (each version's share of traffic). Both take ``--json``.
``view`` is wrangler's old name, kept (hidden) to say what replaced it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ember.cli.environment import chosen_env, env_option, show_warnings
from ember.cli.failure import json_option
from ember.cli.session import name_option, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option
from ember.cli.versions_output import deployment_summary
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
@json_option("Print the deployments as JSON.")
def list_deployments(
    name: str | None, platform_url: str | None, temporary: bool, as_json: bool
) -> None:
    """List the deployments of the worker, oldest first, as wrangler does."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        script = session.account_path(f"/workers/scripts/{path_segment(worker)}")
        found = oldest_first(session.client.call("GET", f"{script}/deployments")["deployments"])
        wanted = [] if as_json else [t["version_id"] for d in found for t in d["versions"]]
        versions = {v: session.client.call("GET", f"{script}/versions/{v}") for v in wanted}
    finally:
        session.close()
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    click.echo("\n\n".join(deployment_summary(d, versions) for d in found))
    # ember's own addition, on stderr: stdout stays wrangler's blocks for scripts.
    click.echo("URLs:", err=True)
    for url in session.worker_urls(worker):
        click.echo(f"  {url}", err=True)


def oldest_first(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """wrangler's order (``created_on`` ascending). The API lists newest first: reversed before
    the stable sort, deployments made in the same millisecond stay in the order they were made."""
    return sorted(reversed(found), key=lambda d: str(d["created_on"]))


@deployments.command("status")
@name_option
@env_option
@platform_option
@temporary_option
@json_option("Print the deployment as JSON.")
def status(name: str | None, platform_url: str | None, temporary: bool, as_json: bool) -> None:
    """Show the live deployment: its versions and their share of traffic."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        script = session.account_path(f"/workers/scripts/{path_segment(worker)}")
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
