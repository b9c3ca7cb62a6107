"""``ember secret put/list/delete``: a worker's secrets (values are write-only)."""

from __future__ import annotations

import sys

import click

from ember.cli.deployments import worker_name
from ember.cli.environment import env_option
from ember.cli.session import name_option, open_session, platform_option


@click.group()
def secret() -> None:
    """Manage a worker's secrets."""


@secret.command("put")
@click.argument("key")
@name_option
@env_option
@platform_option
def put(key: str, name: str | None, platform_url: str | None) -> None:
    """Set secret KEY; the value is read from stdin (or prompted for on a terminal)."""
    worker = worker_name(name, suffix_name=True)
    if sys.stdin.isatty():
        value = click.prompt(f"Value of {key}", hide_input=True)
    else:
        value = sys.stdin.read().rstrip("\n")
    session = open_session(platform_url)
    try:
        session.client.call(
            "PUT",
            session.account_path(f"/workers/scripts/{worker}/secrets"),
            json={"name": key, "text": value, "type": "secret_text"},
        )
    finally:
        session.close()
    click.echo(f"Secret {key} of {worker} is set (a new version is live).")


@secret.command("list")
@name_option
@env_option
@platform_option
def list_secrets(name: str | None, platform_url: str | None) -> None:
    """List the names of the worker's secrets."""
    worker = worker_name(name, suffix_name=True)
    session = open_session(platform_url)
    try:
        found = session.client.call(
            "GET", session.account_path(f"/workers/scripts/{worker}/secrets")
        )
    finally:
        session.close()
    for item in found:
        click.echo(f"{item['name']}\t{item['type']}")


@secret.command("delete")
@click.argument("key")
@name_option
@env_option
@platform_option
def delete_secret(key: str, name: str | None, platform_url: str | None) -> None:
    """Delete secret KEY."""
    worker = worker_name(name, suffix_name=True)
    session = open_session(platform_url)
    try:
        session.client.call(
            "DELETE", session.account_path(f"/workers/scripts/{worker}/secrets/{key}")
        )
    finally:
        session.close()
    click.echo(f"Secret {key} of {worker} is deleted (a new version is live).")
