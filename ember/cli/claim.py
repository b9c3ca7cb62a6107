"""``ember claim TOKEN``: make a temporary account permanent and log in to it."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import click

from ember.cli.credentials import CredentialStore, Login
from ember.cli.failure import json_option
from ember.cli.platform_client import PlatformClient, resolve_platform
from ember.cli.session import platform_option


def claim_token_of(text: str) -> tuple[str, str | None]:
    """A bare claim token, or one taken from a claim URL (whose origin is then the platform)."""
    if text.startswith(("http://", "https://")):
        parsed = urlparse(text)
        token = (parse_qs(parsed.query).get("claimToken") or [""])[0]
        return token, f"{parsed.scheme}://{parsed.netloc}"
    return text, None


@click.command()
@click.argument("token")
@platform_option
@json_option("Print {account: {id, name}, platform} as JSON (`ember auth token` prints the token).")
def claim(token: str, platform_url: str | None, as_json: bool) -> None:
    """Claim a temporary account by its claim TOKEN (or claim URL)."""
    claim_token, url_platform = claim_token_of(token)
    platform = resolve_platform(platform_url or url_platform)
    with PlatformClient(platform) as client:
        result = client.call(
            "POST", "/provisioning/previews/claim", json={"claimToken": claim_token}
        )
    account = result["account"]
    store = CredentialStore()
    store.save_login(platform, Login(result["apiToken"], account["id"], account["name"]))
    cached = store.temporary(platform)
    if cached and cached.account_id == account["id"]:
        store.forget(platform, login=False, temporary=True)
    if as_json:
        result = {"account": {"id": account["id"], "name": account["name"]}, "platform": platform}
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"Claimed account {account['name']}: it and everything in it are permanent now.")
    click.echo(f"Logged in to {platform} as {account['name']} (token saved; see `ember whoami`).")
