"""``ember deployments list``: a worker's deployments, newest first, and its local URLs."""

from __future__ import annotations

from pathlib import Path

import click

from ember.cli.environment import chosen_env, env_option, show_warnings
from ember.cli.session import name_option, open_session, platform_option
from ember.cli.worker_project import load_project


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
def list_deployments(name: str | None, platform_url: str | None) -> None:
    """List the deployments of the worker (newest first)."""
    worker = worker_name(name)
    session = open_session(platform_url)
    try:
        found = session.client.call(
            "GET", session.account_path(f"/workers/scripts/{worker}/deployments")
        )["deployments"]
    finally:
        session.close()
    for index, deployment in enumerate(found):
        annotations = deployment.get("annotations") or {}
        trigger = annotations.get("workers/triggered_by", deployment.get("source", ""))
        live = "  (live)" if index == 0 else ""
        click.echo(f"{deployment['created_on']}  {deployment['id']}  {trigger}{live}")
        for version in deployment["versions"]:
            click.echo(f"    {version['percentage']:g}%  {version['version_id']}")
        if annotations.get("workers/message"):
            click.echo(f"    message: {annotations['workers/message']}")
    click.echo("URLs:")
    for url in session.worker_urls(worker):
        click.echo(f"  {url}")
