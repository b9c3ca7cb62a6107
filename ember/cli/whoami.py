"""``ember whoami``: which platform, which account, and where the credentials come from."""

from __future__ import annotations

import click

from ember.cli.session import open_session, platform_option


@click.command()
@platform_option
def whoami(platform_url: str | None) -> None:
    """Show the account the CLI acts as."""
    session = open_session(platform_url)
    try:
        session.client.call("GET", "/user/tokens/verify")
        account = session.client.call("GET", f"/accounts/{session.account_id}")
    finally:
        session.close()
    kind = account.get("ember", {}).get("kind", "permanent")
    click.echo(f"Platform: {session.platform}")
    click.echo(f"Account:  {account['name']} ({account['id']}), {kind}")
    click.echo(f"Token:    from {session.source}")
    if session.temporary is not None:
        left = session.temporary.expires_in()
        click.echo(f"Expires:  in {left} unless claimed: {session.temporary.claim_url}")
