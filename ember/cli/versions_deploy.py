"""``ember versions deploy [VERSION_ID[@PERCENTAGE]]...``: split traffic between uploaded versions.

wrangler's rules (workers-sdk ``src/versions/deploy.ts``), checked here before any request: one
or two versions; each percentage from 0 to 100, written ``ID@30`` or ``ID@30%`` (or with
``--version-id``/``--percentage`` pairs); a version given without one shares what the others
leave (a single version id alone means 100%); together they make exactly 100. The platform
checks the same rules again (``ember/runtime/deployments/traffic.py``), and that the versions
are the worker's. ember never prompts for the versions: it needs them on the command line.
"""

from __future__ import annotations

import re
import time
from typing import Any

import click

from ember.cli.deployments import worker_name
from ember.cli.environment import env_option
from ember.cli.platform_client import PlatformNotFound, PlatformRequestError
from ember.cli.session import Session, name_option, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option
from ember.cli.versions_output import percent, traffic
from ember.errors import UserError

MAX_VERSIONS = 2
EPSILON = 0.001  # wrangler's: a total within this of 100 is 100
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def parse_traffic(
    specs: tuple[str, ...], version_ids: tuple[str, ...], percentages: tuple[float, ...]
) -> dict[str, float | None]:
    """Version id -> percentage (None: not given) from ``ID[@PCT]`` specs and the options."""
    chosen: dict[str, float | None] = {}
    for spec in specs:
        version_id, _, written = spec.partition("@")
        chosen[version_id] = _percentage(written, f"VERSION_ID@PERCENTAGE {spec!r}")
    for version_id in version_ids:
        if not UUID.fullmatch(version_id):
            raise UserError(
                f"--version-id {version_id!r} is not a version id (a UUID such as "
                "12345678-1234-1234-1234-123456789abc); `ember versions list` shows them"
            )
    if len(percentages) > len(version_ids):
        raise UserError(
            f"--percentage given {len(percentages)} times for {len(version_ids)} --version-id: "
            "each --percentage goes with the --version-id in the same position"
        )
    for index, version_id in enumerate(version_ids):
        given = percentages[index] if index < len(percentages) else None
        if given is not None and not 0 <= given <= 100:
            raise UserError(f"--percentage {given:g} is out of range: use 0 to 100")
        chosen[version_id] = given
    return chosen


def _percentage(written: str, where: str) -> float | None:
    if not written:
        return None
    try:
        value = float(written.removesuffix("%"))
    except ValueError:
        raise UserError(
            f"{where}: {written!r} is not a percentage; write ID@50 or ID@50%"
        ) from None
    if not 0 <= value <= 100:
        raise UserError(f"{where}: {percent(value)}% is out of range: use 0 to 100")
    return value


def split_traffic(chosen: dict[str, float | None]) -> dict[str, float]:
    """Give the versions without a percentage equal shares of what is left; check the rules."""
    if not chosen:
        raise UserError(
            "no version to deploy: name one or two, e.g. `ember versions deploy <version-id>` "
            "or `ember versions deploy <id>@30 <id>@70` (`ember versions list` shows them)"
        )
    if len(chosen) > MAX_VERSIONS:
        raise UserError(
            f"{len(chosen)} versions named: a deployment splits traffic between at most "
            f"{MAX_VERSIONS} versions"
        )
    given = sum(p for p in chosen.values() if p is not None)
    unspecified = [v for v, p in chosen.items() if p is None]
    share = (100 - given) / len(unspecified) if unspecified and given <= 100 else 0.0
    split = {v: share if p is None else p for v, p in chosen.items()}
    total = sum(split.values())
    if abs(total - 100) > EPSILON:
        raise UserError(
            f"the percentages add up to {percent(total)}%; they must total exactly 100%"
        )
    return split


@click.command("deploy")
@click.argument("version_specs", nargs=-1, metavar="[VERSION_ID[@PERCENTAGE]]...")
@click.option("--version-id", "version_ids", multiple=True, metavar="ID", help="A version.")
@click.option(
    "--percentage",
    "percentages",
    multiple=True,
    type=float,
    help="Traffic for the --version-id in the same position (0-100).",
)
@click.option("--message", help="Why: recorded with the deployment.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask when the secrets would change.")
@name_option
@env_option
@platform_option
@temporary_option
def deploy(
    version_specs: tuple[str, ...],
    version_ids: tuple[str, ...],
    percentages: tuple[float, ...],
    message: str | None,
    yes: bool,
    name: str | None,
    platform_url: str | None,
    temporary: bool,
) -> None:
    """Deploy one version, or split traffic between two: VERSION_ID@30 VERSION_ID@70."""
    split = split_traffic(parse_traffic(version_specs, version_ids, percentages))
    worker = worker_name(name)
    session = command_session(platform_url, temporary, deploys="ember versions deploy")
    try:
        show_current(session, worker)
        started = time.perf_counter()
        post_deployment(session, worker, split, message, yes)
    finally:
        session.close()
    parts = [f"version {v} at {percent(p)}%" for v, p in split.items()]
    click.echo(f"Deployed {worker} {' and '.join(parts)} ({time.perf_counter() - started:.2f} sec)")


def show_current(session: Session, worker: str) -> None:
    """The live deployment's split, as wrangler prints it before changing it."""
    script = session.account_path(f"/workers/scripts/{path_segment(worker)}")
    try:
        found = session.client.call("GET", f"{script}/deployments")["deployments"]
    except PlatformNotFound as exc:
        raise UserError(
            f"Worker {worker!r} does not exist on account {session.account_name}: deploy it "
            "with `ember deploy`, then upload versions with `ember versions upload`"
        ) from exc
    if not found:
        return
    current = found[0]
    versions = {
        t["version_id"]: session.client.call("GET", f"{script}/versions/{t['version_id']}")
        for t in current["versions"]
    }
    click.echo(f"Your current deployment has {len(versions)} version(s):")
    click.echo(traffic(current, versions))
    click.echo()


def post_deployment(
    session: Session,
    worker: str,
    split: dict[str, float],
    message: str | None,
    yes: bool,
    question: str = "Deploy anyway?",
) -> dict[str, Any]:
    """``POST .../deployments`` (``versions deploy`` and ``rollback``); when the secrets would
    change (10220) it asks ``question`` (``--yes`` skips it), then forces."""
    path = session.account_path(f"/workers/scripts/{path_segment(worker)}/deployments")
    body = {
        "strategy": "percentage",
        "versions": [{"version_id": v, "percentage": p} for v, p in split.items()],
        "annotations": {"workers/message": message} if message else {},
    }
    try:
        return session.client.call("POST", path, json=body)
    except PlatformRequestError as exc:
        if exc.code != 10220:
            raise
        click.echo(str(exc), err=True)
        if not yes and not click.confirm(question, default=False):
            raise click.Abort() from None
        return session.client.call("POST", path + "?force=true", json=body)
