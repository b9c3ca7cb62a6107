"""``ember deploy [DIR]``: upload the worker and make it live.

Speaks the same API calls as wrangler: ``GET .../services/{name}`` to see whether the worker
exists; a new worker is uploaded with ``PUT .../scripts/{name}`` (live at once), an existing one
with ``POST .../versions`` then ``POST .../deployments`` (an immutable version, then the switch).
KV bindings without an id are provisioned on the first deploy and inherited afterwards.
``--env NAME`` deploys the config's ``[env.NAME]`` as its own worker, ``<name>-NAME``.
The upload flags wrangler's deploy shares with ``versions upload`` (``--var``, ``--keep-vars``,
``--secrets-file``, compatibility, ``--tag``, ``--dry-run``, ``--outdir``) are in
``upload_options``; ``--triggers`` is deploy's own.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shlex
from pathlib import Path
from typing import Any

import click

from ember.cli.assets_upload import sync_assets
from ember.cli.bindings_table import binding_rows, print_bindings, total_upload_line
from ember.cli.deploy_ai import deploy_notes
from ember.cli.environment import chosen_env, env_option, show_warnings
from ember.cli.failure import json_option
from ember.cli.platform_client import (
    DEFAULT_PLATFORM,
    PlatformNotFound,
    platform_origin,
    resolve_platform,
)
from ember.cli.prompts import confirm
from ember.cli.session import Session, name_option, open_session, path_segment, platform_option
from ember.cli.temporary import iso_time, temporary_session
from ember.cli.upload_body import binding_specs, kv_spec, upload_body
from ember.cli.upload_options import (
    ArrayOption,
    OptionError,
    UploadOptions,
    UploadPlan,
    plan_upload,
    today_utc,
    upload_options,
    write_outdir,
)
from ember.cli.versions_output import traffic
from ember.cli.worker_project import KVBinding, WorkerProject, load_project
from ember.runtime.cron import NEVER_RUNS, CronExpression
from ember.runtime.deployments.multipart import Part


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@name_option
@env_option
@platform_option
@click.option(
    "--temporary",
    is_flag=True,
    help="Deploy without an account: a temporary one, claimable for the platform's claim window "
    "(its platform.temporary.ttl; deleted at its end unless claimed) where the platform allows "
    "claims.",
)
@json_option("Print the result as JSON.")
@upload_options
@click.option(
    "--triggers",
    "--schedule",
    "--schedules",
    "triggers",
    cls=ArrayOption,
    multiple=True,
    metavar="CRON",
    help="Cron schedules to attach, replacing triggers.crons (repeatable).",
)
def deploy(
    directory: Path,
    name: str | None,
    platform_url: str | None,
    temporary: bool,
    as_json: bool,
    upload: UploadOptions,
    triggers: tuple[str, ...],
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
    if triggers:
        project = dataclasses.replace(project, crons=check_crons(triggers))
    prepared = prepare_upload(project, upload, as_json)
    if prepared is None:
        return  # a dry run
    plan, modules = prepared
    platform = resolve_platform(platform_url)
    if temporary:
        session, _ = temporary_session(platform, err=as_json, origin=platform_origin(platform_url))
    else:
        session = open_session(platform_url, allow_temporary=False)
    try:
        if not confirm_split_overwrite(session, project.name):
            click.echo("Not deploying: the gradual deployment stays as it is.", err=True)
            raise SystemExit(1)
        result, specs = deploy_project(session, plan, modules)
        notes = deploy_notes(session, project)
    finally:
        session.close()
    if session.temporary is not None:
        login = session.temporary
        result |= {"expires_at": iso_time(login.expires_at), "claimable": login.claimable}
        if login.claimable:  # else the platform turned claims off: nothing to promise
            claim_token = login.claim_url.split("claimToken=", 1)[-1]
            result |= {
                "claim_url": login.claim_url,
                "claim_command": claim_command(claim_token, platform),
            }
    show_warnings(notes)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    # wrangler deploy's lines (workers-sdk deploy tests), so scripts that read "Deployed NAME
    # triggers", the indented URLs and "Current Version ID:" from it read ember's too.
    click.echo(total_upload_line(m.data for m in modules))
    print_bindings(binding_rows(specs, plan.hidden_vars), click.echo)
    click.echo(f"Uploaded {project.name} ({result['size']:,} bytes, {result['modules']} modules)")
    click.echo(f"Deployed {project.name} triggers")
    for url in result["urls"]:
        click.echo(f"  {url}")
    for cron in project.crons or ():  # None: the config has no triggers, nothing changed
        click.echo(f"  schedule: {cron}")
    click.echo(f"Current Version ID: {result['version_id']}")


def check_crons(crons: tuple[str, ...]) -> tuple[str, ...]:
    """``--triggers`` checked here, so a bad one is refused before the upload, not after; one
    that never fires is warned about, as in the config."""
    for cron in crons:
        try:
            expression = CronExpression.parse(cron)
        except ValueError as exc:
            raise OptionError("--triggers", cron, f"a cron expression ({exc})") from None
        if (why := expression.never_fires()) is not None:
            show_warnings([f"--triggers {cron!r} never fires: {why} {NEVER_RUNS}"])
    return crons


def prepare_upload(
    project: WorkerProject, upload: UploadOptions, as_json: bool
) -> tuple[UploadPlan, list[Part]] | None:
    """The flags applied and the modules built (and written to ``--outdir``), for ``deploy``
    and ``versions upload`` alike; ``None`` after a dry run has reported what it would send
    (wrangler's dry run needs no account: nothing is read from the platform either)."""
    plan = plan_upload(
        project, upload, today_utc(), lambda m: show_warnings([m]), environ=os.environ
    )
    # Before the modules are read: a link to a folder outside the project uploads its files,
    # and one left out by the first-name rule is an import that fails on the platform.
    show_warnings([*plan.project.outside_notes(), *plan.project.link_notes])
    modules = plan.project.modules()
    write_outdir(plan, modules, datetime.datetime.now(datetime.UTC).isoformat())
    if not plan.dry_run:
        return plan, modules
    specs = binding_specs(plan, lambda kv: kv_spec(kv.binding, kv.id))
    report_dry_run(plan, modules, specs, as_json)
    return None


def report_dry_run(
    plan: UploadPlan, modules: list[Part], specs: list[dict[str, Any]], as_json: bool
) -> None:
    """What would be uploaded: wrangler's size line and bindings table, then its last line."""
    project = plan.project
    if as_json:
        summary = {
            "dry_run": True,
            "name": project.name,
            "env": project.env,
            "compatibility_date": project.compatibility_date,
            "compatibility_flags": list(project.compatibility_flags),
            "modules": [m.name for m in modules],
            "size": sum(len(m.data) for m in modules),
            "bindings": [{"name": s["name"], "type": s["type"]} for s in specs],
            "keep_bindings": plan.keep_bindings,
            "annotations": dict(plan.annotations),
            "crons": list(project.crons) if project.crons is not None else None,
            "limits": dict(project.limits),
            "outdir": str(plan.outdir) if plan.outdir else None,
        }
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(total_upload_line(m.data for m in modules))
    print_bindings(binding_rows(specs, plan.hidden_vars), click.echo)
    if project.limits:
        click.echo("Limits: " + ", ".join(f"{k}={v}" for k, v in project.limits.items()))
    click.echo("--dry-run: exiting now.")


def confirm_split_overwrite(session: Session, name: str) -> bool:
    """wrangler's confirmLatestDeploymentOverwrite: a deploy over a gradual deployment (two
    versions live) replaces it with the new version at 100%. Show it and warn (on stderr, so
    ``--json`` keeps stdout JSON); ask at a terminal, go on without one (CI), as wrangler."""
    script = session.account_path(f"/workers/scripts/{path_segment(name)}")
    try:
        found = session.client.call("GET", f"{script}/deployments")["deployments"]
    except PlatformNotFound:
        return True  # a new worker: nothing live to replace
    if not found or len(found[0]["versions"]) < 2:
        return True
    latest = found[0]
    versions = {
        t["version_id"]: session.client.call("GET", f"{script}/versions/{t['version_id']}")
        for t in latest["versions"]
    }
    click.echo(
        "WARNING: Your last deployment has multiple versions. To progress that deployment use "
        '"ember versions deploy" instead.',
        err=True,
    )
    click.echo(f"Your last deployment has {len(versions)} version(s):", err=True)
    click.echo(traffic(latest, versions), err=True)
    question = (
        '"ember deploy" will upload a new version and deploy it globally immediately.\n'
        "Are you sure you want to continue?"
    )
    return confirm(question, err=True)


def deploy_project(
    session: Session, plan: UploadPlan, modules: list[Part]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Upload and deploy; the result (printed or JSON) and the binding specs sent."""
    client = session.client
    project = plan.project
    name = project.name
    try:
        client.call("GET", session.account_path(f"/workers/services/{path_segment(name)}"))
        exists = True
    except PlatformNotFound as exc:
        if exc.code not in (10007, 10090):
            raise
        exists = False

    inherited: set[str] | None = None  # the worker's KV bindings now, read once if needed

    def resolve_kv(kv: KVBinding) -> dict[str, Any]:
        nonlocal inherited
        if kv.id:
            return kv_spec(kv.binding, kv.id)
        if exists and inherited is None:
            inherited = _kv_bindings(session, name)
        if inherited and kv.binding in inherited:
            return {"name": kv.binding, "type": "inherit"}
        # A binding the worker lacks (added to the config since, or a worker `ember secret
        # put` made before its first deploy) gets a namespace, as on a first deploy.
        return kv_spec(kv.binding, _provision_kv(session, f"{name}-{kv.binding}".lower()))

    specs = binding_specs(plan, resolve_kv)
    assets = None
    if project.assets is not None:
        assets = sync_assets(session, name, project.assets, str(project.config_file))
    body, headers = upload_body(plan, modules, specs, assets)
    script = session.account_path(f"/workers/scripts/{path_segment(name)}")
    message = plan.annotations.get("workers/message")
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
                # wrangler's createDeployment carries the message only; the tag is the version's.
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
    result = {
        "name": name,
        "account": session.account_name,
        "account_id": session.account_id,
        "version_id": version_id,
        "url": urls[0],
        "urls": urls,
        "size": sum(len(m.data) for m in modules),
        "modules": len(modules),
    }
    return result, specs


def _kv_bindings(session: Session, name: str) -> set[str]:
    """The names of the worker's KV bindings (its live version's settings)."""
    script = session.account_path(f"/workers/scripts/{path_segment(name)}")
    settings = session.client.call("GET", f"{script}/settings")
    return {b["name"] for b in settings.get("bindings", []) if b.get("type") == "kv_namespace"}


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
