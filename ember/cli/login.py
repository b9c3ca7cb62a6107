"""``ember login --token`` and ``ember logout``."""

from __future__ import annotations

import sys

import click

from ember.cli.credentials import CredentialStore, Login
from ember.cli.platform_client import PlatformClient, resolve_platform
from ember.cli.session import platform_option
from ember.errors import AuthError


@click.command()
@platform_option
@click.option(
    "--token", help="An API token of the platform (prompted for at a terminal when omitted)."
)
def login(platform_url: str | None, token: str | None) -> None:
    """Save an API token for a platform after checking it."""
    platform = resolve_platform(platform_url)
    if not token:
        if not sys.stdin.isatty():
            # An agent's or a script's stdin: a prompt there reads nothing and ends in "Aborted".
            raise AuthError(
                "ember login has no terminal to ask for the token on: pass it with "
                "`ember login --token TOKEN`, or set EMBER_API_TOKEN=TOKEN for each command "
                "instead of logging in"
            )
        token = click.prompt("API token", hide_input=True)
    with PlatformClient(platform, token) as client:
        client.call("GET", "/user/tokens/verify")
        account = client.call("GET", "/accounts")[0]
    store = CredentialStore()
    store.save_login(platform, Login(token, account["id"], account["name"]))
    store.forget(platform, login=False, temporary=True)
    click.echo(f"Logged in to {platform} as account {account['name']} ({account['id']}).")


@click.command()
@platform_option
def logout(platform_url: str | None) -> None:
    """Forget the saved login and the cached temporary account for a platform."""
    platform = resolve_platform(platform_url)
    removed = CredentialStore().forget(platform)
    if removed:
        click.echo(f"Removed the saved {' and '.join(removed)} for {platform}.")
    else:
        click.echo(f"Nothing was saved for {platform}.")
