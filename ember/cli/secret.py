"""``ember secret put/list/delete/bulk``: a worker's secrets (values are write-only).

stdout carries wrangler's lines (workers-sdk ``src/secret/index.ts``): ``✨ Success! Uploaded
secret KEY``, ``list`` as a JSON array of ``{name, type}`` (``--format pretty``: ``Secret Name:``
lines), so scripts written for wrangler read ember's; ember's own notes go to stderr. It asks
what wrangler asks, as wrangler's ``confirm`` does (``prompts.py``: at a terminal, else the
fallback, yes, printed): ``delete`` whether to permanently delete the secret, and ``put`` /
``bulk`` on a worker that does not exist whether to create it (``secret_draft.py``). Like
wrangler's, these commands have no ``--yes``: a script gets the fallback.
"""

from __future__ import annotations

import json
import select
import sys
from pathlib import Path
from typing import TextIO

import click

from ember.cli.deployments import worker_name
from ember.cli.environment import env_option
from ember.cli.platform_client import PlatformNotFound
from ember.cli.prompts import confirm
from ember.cli.secret_draft import offer_draft, worker_missing
from ember.cli.session import name_option, path_segment, platform_option
from ember.cli.temporary import command_session, temporary_option

STDIN_NOTE_AFTER_S = 1.0  # how long stdin may stay silent before the note says what it waits for


@click.group()
def secret() -> None:
    """Manage a worker's secrets."""


@secret.command("put")
@click.argument("key")
@name_option
@env_option
@platform_option
@temporary_option
def put(key: str, name: str | None, platform_url: str | None, temporary: bool) -> None:
    """Set secret KEY; the value is read from stdin (or prompted for on a terminal)."""
    worker = worker_name(name, suffix_name=True)
    value = read_value(key)
    session = command_session(platform_url, temporary)
    path = session.account_path(f"/workers/scripts/{path_segment(worker)}/secrets")
    body = {"name": key, "text": value, "type": "secret_text"}
    try:
        click.echo(f'🌀 Creating the secret for the Worker "{worker}"')
        try:
            session.client.call("PUT", path, json=body)
        except PlatformNotFound as exc:
            if not worker_missing(exc):
                raise
            if not offer_draft(session, worker):
                return
            session.client.call("PUT", path, json=body)
    finally:
        session.close()
    click.echo(f"✨ Success! Uploaded secret {key}")
    click.echo(f"{worker}: a new version with the secret is live.", err=True)


def read_value(key: str) -> str:
    """The value of secret ``key``: prompted for at a terminal, else read from stdin to its end,
    trailing whitespace trimmed either way (wrangler's ``trimTrailingWhitespace``). An empty
    value is sent, as wrangler sends it, and named on stderr: stdin was likely /dev/null."""
    if sys.stdin.isatty():
        value = click.prompt("Enter a secret value", hide_input=True)  # wrangler's words
    else:
        if not _ready(sys.stdin, STDIN_NOTE_AFTER_S):
            # A pipe nobody writes to (or closes) would otherwise wait in silence.
            click.echo(
                f"ember: reading the value of {key} from stdin until it ends (close the pipe, "
                "or Ctrl-D)...",
                err=True,
            )
        value = sys.stdin.read()
    value = value.rstrip()
    if not value:
        click.echo(
            f"▲ [WARNING] the value of {key} is empty (stdin gave nothing, or only whitespace); "
            f"it is set to an empty string. Pipe the value in: printf %s VALUE | ember secret "
            f"put {key}",
            err=True,
        )
    return value


def _ready(stream: TextIO, timeout_s: float) -> bool:
    """Whether ``stream`` has data or its end within ``timeout_s`` (a file or /dev/null at
    once; a pipe when its writer writes or closes it)."""
    try:
        readable, _, _ = select.select([stream], [], [], timeout_s)
    except (OSError, ValueError):  # not selectable (no fileno): just read it
        return True
    return bool(readable)


@secret.command("list")
@name_option
@env_option
@platform_option
@temporary_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "pretty"]),
    default="json",
    show_default=True,
    help="How to print the secrets.",
)
def list_secrets(name: str | None, platform_url: str | None, temporary: bool, fmt: str) -> None:
    """List the names and types of the worker's secrets."""
    worker = worker_name(name, suffix_name=True)
    session = command_session(platform_url, temporary)
    try:
        found = session.client.call(
            "GET", session.account_path(f"/workers/scripts/{path_segment(worker)}/secrets")
        )
    finally:
        session.close()
    if fmt == "pretty":
        for item in found:
            click.echo(f"Secret Name: {item['name']}\n")
    else:
        click.echo(json.dumps(found, indent=2))


@secret.command("delete")
@click.argument("key")
@name_option
@env_option
@platform_option
@temporary_option
def delete_secret(key: str, name: str | None, platform_url: str | None, temporary: bool) -> None:
    """Delete secret KEY (asks first at a terminal, as wrangler does)."""
    worker = worker_name(name, suffix_name=True)
    session = command_session(platform_url, temporary)  # logged in before the question
    question = (
        f"Are you sure you want to permanently delete the secret {key} on the Worker {worker}?"
    )
    if not confirm(question, default=True, fallback=True):
        session.close()
        return
    try:
        click.echo(f"🌀 Deleting the secret {key} on the Worker {worker}")
        session.client.call(
            "DELETE",
            session.account_path(
                f"/workers/scripts/{path_segment(worker)}/secrets/{path_segment(key)}"
            ),
        )
    finally:
        session.close()
    click.echo(f"✨ Success! Deleted secret {key}")
    click.echo(f"{worker}: a new version without the secret is live.", err=True)


@secret.command("bulk")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@name_option
@env_option
@platform_option
@temporary_option
def bulk(file: Path | None, name: str | None, platform_url: str | None, temporary: bool) -> None:
    """Create, update or delete many secrets in one new version (up to 100).

    FILE is a JSON object {"KEY": "value", ...} (a null value deletes KEY) or .env lines
    KEY=value; without FILE they are read from stdin.
    """
    from ember.cli.secrets_file import read_secrets

    worker = worker_name(name, suffix_name=True)
    click.echo(f'🌀 Processing the secrets for the Worker "{worker}"')
    changes = read_secrets(file, None if file is not None else sys.stdin.read()).changes
    patch = {
        key: None if value is None else {"name": key, "text": value, "type": "secret_text"}
        for key, value in changes.items()
    }
    session = command_session(platform_url, temporary)

    def send() -> None:
        session.client.call(
            "PATCH",
            session.account_path(f"/workers/scripts/{path_segment(worker)}/secrets-bulk"),
            json={"secrets": patch},
            headers={"content-type": "application/merge-patch+json"},
        )

    try:
        try:
            send()
        except PlatformNotFound as exc:
            # wrangler offers a new worker only when there is a secret to put in it.
            creates = any(value is not None for value in changes.values())
            if not (worker_missing(exc) and creates):
                raise
            if not offer_draft(session, worker):
                return
            send()
    except Exception:
        click.echo("")
        click.echo("🚨 Secrets failed to upload")
        raise
    finally:
        session.close()
    deleted = [key for key, value in changes.items() if value is None]
    created = [key for key, value in changes.items() if value is not None]
    for key in deleted:
        click.echo(f"💥 Successfully deleted secret for key: {key}")
    for key in created:
        click.echo(f"✨ Successfully created secret for key: {key}")
    click.echo("")
    click.echo("Finished processing secrets file:")
    if deleted:
        click.echo(f"💥 {len(deleted)} secrets successfully deleted")
    if created:
        click.echo(f"✨ {len(created)} secrets successfully created")
    if not deleted and not created:
        click.echo("No secrets were created or deleted")
