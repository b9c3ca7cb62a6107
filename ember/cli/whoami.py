"""``ember whoami``: which platform, which account, and where the credentials come from."""

from __future__ import annotations

import json

import click

from ember.cli.credentials import CLAIMS_OFF
from ember.cli.failure import json_option
from ember.cli.session import open_session, platform_option
from ember.cli.temporary import iso_time


@click.command()
@platform_option
@json_option("Print {loggedIn, platform, account, source, temporary} as JSON.")
def whoami(platform_url: str | None, as_json: bool) -> None:
    """Show the account the CLI acts as."""
    session = open_session(platform_url, claim_hint=False)
    try:
        session.client.call("GET", "/user/tokens/verify")
        account = session.client.call("GET", f"/accounts/{session.account_id}")
    finally:
        session.close()
    kind = account.get("ember", {}).get("kind", "permanent")
    temporary = session.temporary
    if as_json:
        # wrangler's whoami --json starts with loggedIn; not logged in is a failure (exit 1).
        claim = None
        if temporary is not None:
            ends = min(temporary.expires_at, temporary.claim_expires_at)
            claim = {
                "expires_at": iso_time(ends),
                # None where the platform turned claims off: there is nothing to claim with.
                "claim_url": temporary.claim_url if temporary.claimable else None,
                "claimable": temporary.claimable,
            }
        result = {
            "loggedIn": True,
            "platform": session.platform,
            "account": {"id": account["id"], "name": account["name"], "kind": kind},
            "source": session.source,
            "temporary": claim,
        }
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"Platform: {session.platform}")
    click.echo(f"Account:  {account['name']} ({account['id']}), {kind}")
    click.echo(f"Token:    from {session.source} (`ember auth token` prints it)")
    if temporary is not None:
        left = temporary.expires_in()
        if temporary.claimable:
            click.echo(f"Expires:  in {left} unless claimed: {temporary.claim_url}")
        else:
            click.echo(f"Expires:  in {left} ({CLAIMS_OFF}: ask its operator for an account)")
