"""``ember deploy [DIR] [--temporary] [--json]``: upload the worker and make it live.

Speaks the same API calls as wrangler: ``GET .../services/{name}`` to see whether the worker
exists; a new worker is uploaded with ``PUT .../scripts/{name}`` (live at once), an existing one
with ``POST .../versions`` then ``POST .../deployments`` (an immutable version, then the switch).
KV bindings without an id are provisioned on the first deploy and inherited afterwards.
``--env NAME`` deploys the config's ``[env.NAME]`` as its own worker, ``<name>-NAME``.
"""

from __future__ import annotations

import json
import secrets
import shlex
from pathlib import Path
from typing import Any

import click

from ember.cli.environment import chosen_env, env_option, show_warnings
from ember.cli.platform_client import DEFAULT_PLATFORM, PlatformNotFound, resolve_platform
from ember.cli.session import Session, name_option, open_session, platform_option
from ember.cli.temporary import iso_time, temporary_session
from ember.cli.worker_project import WorkerProject, load_project
from ember.runtime.deployments.multipart import Part, build_multipart


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@name_option
@env_option
@platform_option
@click.option(
    "--temporary",
    is_flag=True,
    help="Deploy without an account: a temporary one, claimable for 60 minutes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--message", help="A message recorded with the version.")
def deploy(
    directory: Path,
    name: str | None,
    platform_url: str | None,
    temporary: bool,
    as_json: bool,
    message: str | None,
) -> None:
    """Deploy the worker in DIRECTORY (default: here) to an ember platform."""
    choice = chosen_env()
    project = load_project(directory, name, choice.name)
    show_warnings(project.warnings)
    if project.env is None and project.environments and not choice.from_flag:
        # wrangler's warnIfMultipleEnvsConfiguredButNoneSpecified, for deploy.
        show_warnings(
            [
                "Multiple environments are defined in the config file, but no target "
                "environment was specified for the deploy command. To avoid unintentional "
                "changes to the wrong environment, specify it with -e/--env or "
                'CLOUDFLARE_ENV; --env="" targets the top level.'
            ]
        )
    platform = resolve_platform(platform_url)
    if temporary:
        session, _ = temporary_session(platform, err=as_json)
    else:
        session = open_session(platform_url, allow_temporary=True)
    try:
        result = deploy_project(session, project, message)
    finally:
        session.close()
    if session.temporary is not None:
        login = session.temporary
        claim_token = login.claim_url.split("claimToken=", 1)[-1]
        result |= {
            "claim_url": login.claim_url,
            "claim_command": claim_command(claim_token, platform),
            "expires_at": iso_time(login.expires_at),
        }
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    # wrangler deploy's lines (workers-sdk deploy tests), so scripts that read "Deployed NAME
    # triggers", the indented URLs and "Current Version ID:" from it read ember's too.
    click.echo(f"Uploaded {project.name} ({result['size']:,} bytes, {result['modules']} modules)")
    click.echo(f"Deployed {project.name} triggers")
    for url in result["urls"]:
        click.echo(f"  {url}")
    click.echo(f"Current Version ID: {result['version_id']}")


def deploy_project(session: Session, project: WorkerProject, message: str | None) -> dict[str, Any]:
    client = session.client
    name = project.name
    try:
        client.call("GET", session.account_path(f"/workers/services/{name}"))
        exists = True
    except PlatformNotFound as exc:
        if exc.code not in (10007, 10090):
            raise
        exists = False
    body, headers, modules = build_upload(session, project, message, exists=exists)
    script = session.account_path(f"/workers/scripts/{name}")
    if exists:
        version = client.call(
            "POST", f"{script}/versions?bindings_inherit=strict", content=body, headers=headers
        )
        version_id = version["id"]
        client.call(
            "POST",
            f"{script}/deployments",
            json={
                "strategy": "percentage",
                "versions": [{"version_id": version_id, "percentage": 100}],
                "annotations": {"workers/message": message} if message else {},
            },
        )
    else:
        version_id = client.call(
            "PUT", f"{script}?bindings_inherit=strict", content=body, headers=headers
        )["deployment_id"]
    if project.crons is not None:
        client.call("PUT", f"{script}/schedules", json=[{"cron": cron} for cron in project.crons])
    urls = session.worker_urls(name)
    return {
        "name": name,
        "account": session.account_name,
        "account_id": session.account_id,
        "version_id": version_id,
        "url": urls[0],
        "urls": urls,
        "size": sum(len(m.data) for m in modules),
        "modules": len(modules),
    }


def build_upload(
    session: Session,
    project: WorkerProject,
    message: str | None,
    *,
    exists: bool,
    tag: str | None = None,
) -> tuple[bytes, dict[str, str], list[Part]]:
    """The multipart upload of ``project`` (body, headers, modules), as wrangler builds it;
    ``ember versions upload`` sends the same body to ``POST .../versions``."""
    modules = project.modules()
    metadata = {
        "main_module": modules[0].name,
        "bindings": _bindings(session, project, exists),
        "compatibility_date": project.compatibility_date,
        "compatibility_flags": list(project.compatibility_flags),
        "keep_bindings": ["secret_text", "secret_key"],
    }
    annotations = {"workers/message": message, "workers/tag": tag}
    if message or tag:
        metadata["annotations"] = {k: v for k, v in annotations.items() if v}
    boundary = "----ember-" + secrets.token_hex(12)
    body = build_multipart(
        [Part("metadata", None, None, json.dumps(metadata).encode()), *modules], boundary
    )
    return body, {"content-type": f"multipart/form-data; boundary={boundary}"}, modules


def _bindings(session: Session, project: WorkerProject, exists: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, value in project.vars.items():
        if isinstance(value, str):
            out.append({"name": key, "type": "plain_text", "text": value})
        else:
            out.append({"name": key, "type": "json", "json": value})
    for kv in project.kv_namespaces:
        if kv.id:
            out.append({"name": kv.binding, "type": "kv_namespace", "namespace_id": kv.id})
        elif exists:
            out.append({"name": kv.binding, "type": "inherit"})
        else:
            out.append(
                {
                    "name": kv.binding,
                    "type": "kv_namespace",
                    "namespace_id": _provision_kv(session, f"{project.name}-{kv.binding}".lower()),
                }
            )
    if project.ai_binding:
        out.append({"name": project.ai_binding, "type": "ai"})
    return out


def _provision_kv(session: Session, title: str) -> str:
    path = session.account_path("/storage/kv/namespaces")
    for page in range(1, 1000):
        found = session.client.call("GET", f"{path}?per_page=100&page={page}")
        for namespace in found:
            if namespace["title"] == title:
                return namespace["id"]
        if len(found) < 100:
            break
    click.echo(f"Creating KV namespace {title!r}…", err=True)
    return session.client.call("POST", path, json={"title": title})["id"]


def claim_command(claim_token: str, platform: str) -> str:
    """The ``ember claim`` line to print. The token is URL-safe base64, so one in 64 starts with
    ``-``: options come first and ``--`` ends them, or click would read it as an option."""
    command = ["ember", "claim"]
    if platform != DEFAULT_PLATFORM:
        command += ["--platform", platform]
    return shlex.join([*command, "--", claim_token])
