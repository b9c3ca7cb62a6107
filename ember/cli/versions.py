"""``ember versions upload|list|view|deploy``: wrangler's versions, on an ember platform.

``upload`` stores a new immutable version without sending it traffic (``POST .../versions``, the
same multipart body ``ember deploy`` builds); ``deploy`` (``versions_deploy.py``) makes one live
or splits traffic between two. ``list`` and ``view`` print what wrangler prints (see
``versions_output.py``), or the API's objects with ``--json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ember.cli.assets_upload import sync_assets
from ember.cli.deploy import prepare_upload
from ember.cli.deployments import worker_name
from ember.cli.environment import EnvChoice, chosen_env, env_option, show_warnings
from ember.cli.failure import json_option
from ember.cli.platform_client import PlatformNotFound
from ember.cli.session import Session, name_option, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option
from ember.cli.upload_body import binding_specs, kv_spec, upload_body
from ember.cli.upload_options import (
    UploadOptions,
    UploadPlan,
    upload_options,
)
from ember.cli.versions_deploy import deploy
from ember.cli.versions_output import labelled, version_summary
from ember.cli.worker_project import KVBinding, WorkerProject, load_project
from ember.errors import UserError
from ember.runtime.deployments.multipart import Part

LIST_LIMIT = 10  # wrangler lists the 10 most recent


@click.group()
def versions() -> None:
    """Upload versions of a worker, list and view them, and deploy them gradually."""


versions.add_command(deploy)


@versions.command("upload")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@name_option
@env_option
@platform_option
@temporary_option
@json_option("Print the new version as JSON (its id, number, metadata).")
@upload_options
def upload(
    directory: Path,
    name: str | None,
    platform_url: str | None,
    temporary: bool,
    as_json: bool,
    upload: UploadOptions,
) -> None:
    """Upload the worker in DIRECTORY as a new version, without deploying it."""
    choice = chosen_env()
    project = load_project(directory, name, choice.name)
    show_warnings([*project.warnings, *_no_env_warning(project, choice)])
    # The same flags as ``ember deploy`` (wrangler's shared deploy args), applied the same way.
    prepared = prepare_upload(project, upload, as_json=as_json)
    if prepared is None:
        return  # a dry run
    plan, modules = prepared
    session = command_session(platform_url, temporary, deploys="ember versions upload")
    try:
        version = upload_version(session, plan, modules)
    finally:
        session.close()
    if as_json:
        click.echo(json.dumps(version, indent=2))
        return
    size = sum(len(m.data) for m in modules)
    click.echo(f"Uploaded {project.name} ({size:,} bytes, {len(modules)} modules)")
    click.echo(f"Worker Version ID: {version['id']}")
    click.echo(
        "To deploy this version to production traffic use the command `ember versions deploy`"
    )


def upload_version(session: Session, plan: UploadPlan, modules: list[Part]) -> dict[str, Any]:
    """The new version. The worker must exist: deploy it once first (so KV bindings without an
    id are inherited from its live version, never provisioned here, as in wrangler)."""
    project: WorkerProject = plan.project
    script = session.account_path(f"/workers/scripts/{path_segment(project.name)}")
    try:
        session.client.call(
            "GET", session.account_path(f"/workers/services/{path_segment(project.name)}")
        )
    except PlatformNotFound as exc:
        raise UserError(
            f"Worker {project.name!r} does not exist on account {session.account_name}: "
            "deploy it once with `ember deploy`, then upload versions of it"
        ) from exc

    def inherit(kv: KVBinding) -> dict[str, Any]:
        return kv_spec(kv.binding, kv.id) if kv.id else {"name": kv.binding, "type": "inherit"}

    assets = None
    if project.assets is not None:
        assets = sync_assets(session, project.name, project.assets, str(project.config_file))
    body, headers = upload_body(plan, modules, binding_specs(plan, inherit), assets)
    return session.client.call(  # type: ignore[no-any-return]
        "POST", f"{script}/versions?bindings_inherit=strict", content=body, headers=headers
    )


def _no_env_warning(project: WorkerProject, choice: EnvChoice) -> list[str]:
    """wrangler's warnIfMultipleEnvsConfiguredButNoneSpecified, as ``ember deploy`` warns."""
    if project.env is not None or not project.environments or choice.from_flag:
        return []
    return [
        "Multiple environments are defined in the config file, but no target environment "
        "was specified for the versions upload command. To avoid unintentional changes to "
        'the wrong environment, specify it with -e/--env or CLOUDFLARE_ENV; --env="" targets '
        "the top level."
    ]


@versions.command("list")
@name_option
@env_option
@platform_option
@temporary_option
@json_option("Print the versions as JSON.")
def list_versions(
    name: str | None, platform_url: str | None, temporary: bool, as_json: bool
) -> None:
    """List the 10 most recent versions of the worker (oldest first)."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        path = session.account_path(
            f"/workers/scripts/{path_segment(worker)}/versions?deployable=true"
        )
        items = session.client.call("GET", path)["items"]
    finally:
        session.close()
    items = sorted(items, key=lambda v: (v["metadata"]["created_on"], v.get("number", 0)))
    items = items[-LIST_LIMIT:]
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    for version in items:
        click.echo(labelled(version_summary(version)))
        click.echo()


@versions.command("view")
@click.argument("version_id")
@name_option
@env_option
@platform_option
@temporary_option
@json_option("Print the version as JSON.")
def view(
    version_id: str, name: str | None, platform_url: str | None, temporary: bool, as_json: bool
) -> None:
    """Show one version of the worker: when, who, why, its runtime settings and bindings."""
    worker = worker_name(name)
    session = command_session(platform_url, temporary)
    try:
        path = session.account_path(
            f"/workers/scripts/{path_segment(worker)}/versions/{path_segment(version_id)}"
        )
        version = session.client.call("GET", path)
    finally:
        session.close()
    if as_json:
        click.echo(json.dumps(version, indent=2))
        return
    click.echo(labelled(version_summary(version)))
    resources = version.get("resources") or {}
    runtime = resources.get("script_runtime") or {}
    handlers = (resources.get("script") or {}).get("handlers")
    script = {
        "Handlers": ", ".join(handlers or []),
        "Compatibility Date": runtime.get("compatibility_date") or "",
        "Compatibility Flags": ", ".join(runtime.get("compatibility_flags") or []),
    }
    script = {k: v for k, v in script.items() if v}
    if script:
        click.echo()
        click.echo(labelled(script))
    bindings = resources.get("bindings") or []
    secrets = [b for b in bindings if b["type"] in ("secret_text", "secret_key")]
    if secrets:
        click.echo("Secrets:")
        for secret in secrets:
            click.echo(labelled({"Secret Name": secret["name"]}))
    others = [b for b in bindings if b not in secrets]
    if others:
        click.echo("Bindings:")
        for binding in others:
            click.echo(f"  env.{binding['name']} ({_describe(binding)})")


def _describe(binding: dict[str, Any]) -> str:
    """A binding's type and what it points at, as one short phrase."""
    detail = {
        "plain_text": json.dumps(binding.get("text")),
        "json": json.dumps(binding.get("json")),
        "kv_namespace": binding.get("namespace_id"),
    }.get(binding["type"])
    return f"{binding['type']}: {detail}" if detail else binding["type"]
