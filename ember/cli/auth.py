"""``ember auth token``: the API token the CLI would send, for REST, the openai client or curl.

wrangler 4's ``wrangler auth token`` (like ``gh auth token``): the bare token on stdout for
``$(...)``, or with ``--json`` an object naming its type. ember's token comes from the same
places every command's does (session.py): ``EMBER_API_TOKEN`` (``api_token``), the login saved
by ``ember login`` or ``ember claim`` (``login``), else the temporary account ``ember deploy
--temporary`` cached (``temporary``). Nothing is sent to the platform.
"""

from __future__ import annotations

import json
import os

import click

from ember.cli.credentials import CredentialStore
from ember.cli.failure import json_option
from ember.cli.platform_client import resolve_platform
from ember.cli.session import platform_option, temporary_expired
from ember.cli.temporary import iso_time
from ember.errors import AuthError


@click.group()
def auth() -> None:
    """The credentials the CLI uses."""


@auth.command("token")
@platform_option
@json_option("Print {type, token, platform, account_id, account_name, expires_at} as JSON.")
def token(platform_url: str | None, as_json: bool) -> None:
    """Print the API token for the platform: for its REST API and /ai/v1 (OpenAI-compatible)."""
    platform = resolve_platform(platform_url)
    store = CredentialStore()
    result: dict[str, object] = {"platform": platform}
    env_token = os.environ.get("EMBER_API_TOKEN")
    login = None if env_token else store.login(platform)
    temporary = None if env_token or login else store.temporary(platform)
    if env_token:
        # Its account is known only to the platform (GET /client/v4/accounts).
        result |= {"type": "api_token", "token": env_token, "account_id": None}
        result |= {"account_name": None, "expires_at": None}
    elif login is not None:
        result |= {"type": "login", "token": login.token, "account_id": login.account_id}
        result |= {"account_name": login.account_name, "expires_at": None}
    elif temporary is not None and temporary.valid():
        ends = min(temporary.expires_at, temporary.claim_expires_at)
        result |= {"type": "temporary", "token": temporary.token}
        result |= {"account_id": temporary.account_id, "account_name": temporary.account_name}
        result |= {"expires_at": iso_time(ends)}
    elif temporary is not None:
        raise AuthError(temporary_expired(platform, temporary))
    else:
        raise AuthError(
            f"not logged in to {platform}: run `ember login --token TOKEN`, set "
            "EMBER_API_TOKEN, or deploy without an account using `ember deploy --temporary`"
        )
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(result["token"])
