"""Which platform and which credentials a command uses, and the shared click options.

Credentials, in order: ``EMBER_API_TOKEN``; the login saved by ``ember login`` or ``ember claim``;
a still-valid temporary account cached by ``ember deploy --temporary``. A command that falls back
to that temporary account says so on stderr, naming it and when it expires (once it has expired,
that it was deleted, and when); a plain ``ember
deploy`` refuses it, as a plain ``wrangler deploy`` does not pick up wrangler's cache
(cloudflare-api.md §4.3): a deploy there would vanish with the account unless claimed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import click

from ember.cli.credentials import CLAIMS_OFF, CredentialStore, TemporaryLogin
from ember.cli.platform_client import PlatformClient, platform_origin, resolve_platform
from ember.errors import AuthError, EmberError

platform_option = click.option(
    "--platform",
    "platform_url",
    metavar="URL",
    help="The ember platform (default: $EMBER_PLATFORM, else http://127.0.0.1:8787).",
)
name_option = click.option(
    "--name", metavar="WORKER", help="The Worker's name (default: from the project's config)."
)


def path_segment(value: str) -> str:
    """``value`` as one URL path segment: percent-encoded with nothing left safe (``/`` too), and a
    segment of only ``.`` or ``..`` with its dots encoded: a client resolves those as "this" and
    "the parent" before sending (RFC 3986 5.2.4), so ``values/..`` would reach the namespace
    itself and ``secrets/..`` the worker's script. The platform decodes ``%2E`` back to ``.``."""
    encoded = quote(value, safe="")
    return "%2E" * len(encoded) if encoded in (".", "..") else encoded


@dataclass
class Session:
    platform: str
    client: PlatformClient
    account_id: str
    account_name: str
    source: str
    temporary: TemporaryLogin | None = None

    def close(self) -> None:
        self.client.close()

    def account_path(self, suffix: str) -> str:
        return f"/accounts/{self.account_id}{suffix}"

    def worker_urls(self, worker: str) -> list[str]:
        """The local URLs a person can open: by Host name, and by path."""
        scheme, _, hostport = self.platform.partition("://")
        host, _, port = hostport.partition(":")
        suffix = f":{port}" if port else ""
        return [
            f"{scheme}://{worker}.{self.account_name}.localhost{suffix}/",
            f"{self.platform}/w/{self.account_name}/{worker}/",
        ]


def existing_credentials(platform: str, store: CredentialStore) -> str | None:
    """A description of the permanent credentials for ``platform``, if any."""
    if os.environ.get("EMBER_API_TOKEN"):
        return "EMBER_API_TOKEN is set"
    login = store.login(platform)
    if login:
        return f"you are logged in as account {login.account_name} (ember login)"
    return None


@dataclass(frozen=True)
class SavedCredentials:
    """A token and the account it acts for, as ``open_session`` would pick them."""

    token: str
    account_id: str


def saved_credentials(url: str) -> SavedCredentials | None:
    """The credentials ``open_session`` would use for the platform at ``url``, or None (an
    ``ember dev``, or no login): for commands that work with and without an account."""
    platform = resolve_platform(url)
    env_token = os.environ.get("EMBER_API_TOKEN")
    # EMBER_API_TOKEN belongs to the configured platform ($EMBER_PLATFORM): never sent to
    # another URL (an ember dev, or anything else --url names). Saved logins are per platform.
    if env_token and platform == resolve_platform(None):
        try:
            with PlatformClient(platform, env_token) as client:
                accounts = client.call("GET", "/accounts")
        except EmberError:
            return None  # not a platform (ember dev has no accounts), or not this token's
        return SavedCredentials(env_token, accounts[0]["id"]) if accounts else None
    store = CredentialStore()
    login = store.login(platform)
    if login:
        return SavedCredentials(login.token, login.account_id)
    temporary = store.temporary(platform)
    if temporary and temporary.valid():
        click.echo(acting_on(temporary), err=True)
        return SavedCredentials(temporary.token, temporary.account_id)
    if temporary is not None:  # the platform deleted it: say so, as open_session does
        raise AuthError(temporary_expired(platform, temporary))
    return None


def open_session(
    platform_option: str | None,
    *,
    allow_temporary: bool = True,
    command: str = "ember deploy",
    claim_hint: bool = True,
) -> Session:
    """A session from EMBER_API_TOKEN, the saved login, or (``allow_temporary``) the cached
    temporary account; ``command`` names the refusing command when that is not allowed.
    ``claim_hint``: whether the temporary account's note points to ``ember whoami`` (not from
    whoami itself, which prints the claim URL)."""
    platform = resolve_platform(platform_option)
    origin = platform_origin(platform_option)
    store = CredentialStore()
    env_token = os.environ.get("EMBER_API_TOKEN")
    if env_token:
        client = PlatformClient(platform, env_token, origin=origin)
        accounts = client.call("GET", "/accounts")
        if not accounts:
            raise AuthError(f"the token in EMBER_API_TOKEN has no account on {platform}")
        return Session(platform, client, accounts[0]["id"], accounts[0]["name"], "EMBER_API_TOKEN")
    login = store.login(platform)
    if login:
        return Session(
            platform,
            PlatformClient(platform, login.token, origin=origin),
            login.account_id,
            login.account_name,
            "saved login",
        )
    temporary = store.temporary(platform)
    if temporary and temporary.valid():
        if not allow_temporary:
            raise AuthError(temporary_not_used(platform, temporary, command))
        # stderr: stdout stays what scripts read (JSON, wrangler's lines).
        click.echo(acting_on(temporary, claim_hint=claim_hint), err=True)
        return Session(
            platform,
            PlatformClient(platform, temporary.token, origin=origin),
            temporary.account_id,
            temporary.account_name,
            "temporary account",
            temporary,
        )
    with PlatformClient(platform, origin=origin) as anonymous:
        anonymous.check_reachable()  # an unreachable URL is the problem, not the login
    if temporary is not None:  # cached, and past its expiry: say which account went, and when
        raise AuthError(temporary_expired(platform, temporary))
    raise AuthError(
        f"not logged in to {platform}: run `ember login --token TOKEN`, set EMBER_API_TOKEN, "
        "or deploy without an account using `ember deploy --temporary`"
    )


def temporary_expired(platform: str, temporary: TemporaryLogin) -> str:
    """Why the cached temporary account no longer works: the platform deleted it at expiry."""
    ended = min(temporary.expires_at, temporary.claim_expires_at)
    at = datetime.fromtimestamp(ended, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return (
        f"not logged in to {platform}: your temporary account {temporary.account_name} expired "
        f"at {at} and was deleted with its workers; `ember deploy --temporary` makes a new one "
        "(or `ember login --token TOKEN` for a permanent account)"
    )


def acting_on(temporary: TemporaryLogin, *, claim_hint: bool = True) -> str:
    """What a command says when it falls back to the cached temporary account."""
    if not temporary.claimable:
        return (
            f"Acting on the temporary account {temporary.account_name} (expires in "
            f"{temporary.expires_in()}; {CLAIMS_OFF})"
        )
    hint = ": `ember whoami` shows its claim URL" if claim_hint else ""
    return (
        f"Acting on the temporary account {temporary.account_name} (expires in "
        f"{temporary.expires_in()} unless claimed{hint})"
    )


def temporary_not_used(
    platform: str, temporary: TemporaryLogin, command: str = "ember deploy"
) -> str:
    """Why a plain ``command`` (a deploy or a version upload) will not use the cached
    temporary account."""
    wrangler = command.replace("ember", "wrangler", 1)
    unless = " unless claimed" if temporary.claimable else ""
    claiming = (
        f"; claiming {temporary.account_name} (`ember whoami` shows its claim URL) makes it "
        "permanent"
        if temporary.claimable
        else f" ({CLAIMS_OFF})"
    )
    return (
        f"not logged in to {platform}: the only saved credentials are the temporary account "
        f"{temporary.account_name} (expires in {temporary.expires_in()}{unless}), and a "
        f"plain `{command}` does not use it (nor does a plain `{wrangler}`). Run "
        f"`{command} --temporary` to deploy there, or `ember login --token TOKEN` (or set "
        f"EMBER_API_TOKEN) to deploy to a permanent account{claiming}"
    )
