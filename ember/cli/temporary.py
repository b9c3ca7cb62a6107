"""``--temporary``: get a temporary account (proof of work) or reuse the cached one.

The same two unauthenticated calls wrangler makes (cloudflare-api.md §4.1), then the block users
know from ``wrangler deploy --temporary``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import click

from ember.cli.credentials import CLAIMS_OFF, CredentialStore, TemporaryLogin, distance
from ember.cli.platform_client import PlatformClient, platform_origin, resolve_platform
from ember.cli.session import Session, existing_credentials, open_session
from ember.errors import AuthError, UserError
from ember.runtime.deployments import pow

# wrangler's ``--temporary`` on the commands its ``supportTemporary`` lists (versions, deployments).
temporary_option = click.option(
    "--temporary",
    is_flag=True,
    help="Use a temporary account: the one `ember deploy --temporary` made, else a new one.",
)


def command_session(
    platform_url: str | None, temporary: bool, *, deploys: str | None = None
) -> Session:
    """The session of a command that takes ``--temporary`` (its notes go to stderr).

    ``deploys``: the command's name when it uploads or deploys versions (``ember versions
    upload``): like ``ember deploy`` and wrangler, it then uses the cached temporary account only
    with ``--temporary``, so nothing lands on an account that expires without being asked."""
    if temporary:
        platform = resolve_platform(platform_url)
        return temporary_session(platform, err=True, origin=platform_origin(platform_url))[0]
    if deploys is not None:
        return open_session(platform_url, allow_temporary=False, command=deploys)
    return open_session(platform_url)


def temporary_session(
    platform: str, *, err: bool, origin: str | None = None
) -> tuple[Session, bool]:
    """A session on a temporary account: (session, created). Refuses if credentials exist.

    ``origin``: how the URL was chosen (``platform_origin``), named if it cannot be reached."""
    store = CredentialStore()
    reason = existing_credentials(platform, store)
    if reason:
        raise AuthError(
            f"{reason} for {platform}, so --temporary can't be used: run `ember deploy` "
            "without --temporary to deploy to that account, or `ember logout` (and unset "
            "EMBER_API_TOKEN) first"
        )
    cached = store.temporary(platform)
    created = False
    if cached is None or not cached.valid():
        with PlatformClient(platform, origin=origin) as anonymous:
            anonymous.check_reachable()  # before the work, not after it
        click.echo("Solving proof-of-work challenge…", err=err)
        cached = _provision(platform, origin)
        store.save_temporary(platform, cached)
        created = True
    click.echo(ready_block(cached, created), err=err)
    return Session(
        platform,
        PlatformClient(platform, cached.token, origin=origin),
        cached.account_id,
        cached.account_name,
        "temporary account",
        cached,
    ), created


def _provision(platform: str, origin: str | None) -> TemporaryLogin:
    with PlatformClient(platform, origin=origin) as anonymous:
        raw = anonymous.call("POST", "/provisioning/previews/challenge", json={})
        try:
            challenge = pow.Challenge(
                raw["challengeToken"], raw["seed"], int(raw["k"]), int(raw["g"]), 0.0
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"the platform sent a malformed challenge: {raw!r}") from exc
        if challenge.k * challenge.g > 64_000_000 or len(pow.b64url_decode(challenge.seed)) != 32:
            raise UserError(
                "the platform's proof-of-work challenge is not supported (more than "
                "64M hashes, or a seed that is not 32 bytes)"
            )
        result = anonymous.call(
            "POST",
            "/provisioning/previews",
            json={
                "acceptTermsOfService": "yes",
                "challengeToken": challenge.token,
                "solution": {"checkpoints": pow.solve_challenge(challenge)},
            },
        )
    account, claim = result["account"], result["claim"]
    return TemporaryLogin(
        token=account["apiToken"],
        account_id=account["id"],
        account_name=account["name"],
        expires_at=parse_time(account["expiresAt"]),
        claim_url=claim["url"],
        claim_expires_at=parse_time(claim["expiresAt"]),
        claimable=claim.get("claimable", True) is not False,
    )


def iso_time(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def ready_block(login: TemporaryLogin, created: bool) -> str:
    head = (
        "Temporary account ready:\n"
        f"\tAccount: {login.account_name} ({'created' if created else 'reused'})\n"
    )
    if not login.claimable:
        return head + (
            f"\tExpires in: {login.expires_in()}, then it is deleted with its workers "
            f"({CLAIMS_OFF}; ask its operator for an account to keep them)\n"
        )
    return head + (
        f"\tClaim within: {distance(login.claim_expires_at - time.time())}\n"
        f"\tClaim URL: {login.claim_url}\n"
    )
