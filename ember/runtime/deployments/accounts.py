"""Accounts, API tokens, temporary accounts and claims.

Tokens are 240-bit random strings, so a plain SHA-256 is the right way to store them (a slow
password hash buys nothing against an unguessable secret and would cost every request). Each
token belongs to exactly one account; a temporary account's tokens expire with it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
import uuid
from datetime import UTC, datetime

from ember.runtime.deployments.clock import Clock
from ember.runtime.deployments.config import PlatformConfig
from ember.runtime.deployments.database import Database
from ember.runtime.deployments.errors import (
    TOKEN_NOT_VALID,
    ClaimRejected,
    ClaimsTurnedOff,
    InvalidRequest,
    ProofOfWorkRejected,
    RateLimited,
    Unauthenticated,
)
from ember.runtime.deployments.records import (
    Account,
    ApiToken,
    Claimed,
    IssuedToken,
    TemporaryAccount,
)

TOKEN_PREFIX = "ember_"
# The window platform.temporary.claims_per_day counts a client's claims in.
CLAIM_WINDOW = 86400.0
ACCOUNT_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_ADJECTIVES = (
    "quiet brave calm eager fancy gentle happy jolly kind lively merry nimble proud rapid "
    "shiny swift tidy witty bold bright clever cosmic dapper fuzzy golden humble lucky mellow"
).split()
_ANIMALS = (
    "otter badger beaver bison crane dingo eagle ferret gecko heron ibis jackal koala lemur "
    "marmot narwhal ocelot panda quokka raven seal tapir urchin vole walrus yak zebra fox lynx"
).split()


def hash_secret(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class AccountService:
    def __init__(self, db: Database, config: PlatformConfig, clock: Clock) -> None:
        self._db = db
        self._config = config
        self._clock = clock

    # -- creation -------------------------------------------------------------------------------

    def create_permanent(self, name: str, email: str | None = None) -> tuple[Account, IssuedToken]:
        """An operator-made account (``ember accounts create``) and its first token."""
        if not ACCOUNT_NAME.match(name):
            raise InvalidRequest(
                f"account name {name!r} must be a DNS label: lowercase letters, digits and '-', "
                "at most 63 characters (it becomes the <account> part of worker URLs)"
            )
        now = self._clock()
        account = Account(
            uuid.uuid4().hex, name, "permanent", email or f"{name}@ember.localhost", now, None, None
        )
        with self._db.transaction() as conn:
            if conn.execute("SELECT 1 FROM accounts WHERE name = ?", (name,)).fetchone():
                raise InvalidRequest(f"an account named {name!r} already exists")
            _insert_account(conn, account, claim_hash=None)
            token = _insert_token(conn, account.id, now, expires_at=None)
        return account, token

    def create_temporary(
        self, client: str, challenge_hash: str, challenge_expiry: float
    ) -> TemporaryAccount:
        """Spend a verified challenge and create a temporary account, in one transaction.

        The challenge is recorded as used and the client's creation counted in the same commit,
        so neither a replay nor a crash between the two can mint a second account.
        """
        now = self._clock()
        limit = self._config.temporary.creations_per_client_per_hour
        ttl = self._config.temporary.ttl_seconds
        claim_token = secrets.token_urlsafe(24)
        with self._db.transaction() as conn:
            try:
                conn.execute(
                    "INSERT INTO used_challenges VALUES (?, ?)", (challenge_hash, challenge_expiry)
                )
            except sqlite3.IntegrityError:
                raise ProofOfWorkRejected(
                    "this proof-of-work challenge was already used; request a new challenge"
                ) from None
            recent = conn.execute(
                "SELECT COUNT(*) FROM temporary_account_creations WHERE client = ? "
                "AND created_at > ?",
                (client, now - 3600),
            ).fetchone()[0]
            if recent >= limit:
                raise RateLimited(
                    "temporary_accounts_per_hour",
                    recent + 1,
                    limit,
                    f"This client created {recent} temporary accounts in the last hour; the "
                    f"limit is {limit}. Wait, or log in with an API token (ember login).",
                )
            name = _fresh_name(conn)
            account = Account(
                uuid.uuid4().hex, name, "temporary", f"{name}@ember.localhost", now, now + ttl, None
            )
            _insert_account(conn, account, claim_hash=hash_secret(claim_token))
            token = _insert_token(conn, account.id, now, expires_at=account.expires_at)
            conn.execute("INSERT INTO temporary_account_creations VALUES (?, ?)", (client, now))
        return TemporaryAccount(account=account, token=token, claim_token=claim_token)

    def issue_token(self, account_id: str) -> IssuedToken:
        account = self.get(account_id)
        with self._db.transaction() as conn:
            return _insert_token(conn, account_id, self._clock(), account.expires_at)

    # -- lookup ---------------------------------------------------------------------------------

    def authenticate(self, token: str | None) -> tuple[Account, ApiToken]:
        """The account a bearer token belongs to, or ``Unauthenticated`` saying why not."""
        if not token:
            raise Unauthenticated(
                "Authentication error: send an API token as 'Authorization: Bearer <token>' "
                "(ember login --token, EMBER_API_TOKEN, or CLOUDFLARE_API_TOKEN for wrangler)"
            )
        now = self._clock()
        with self._db.reader() as conn:
            row = conn.execute(
                "SELECT * FROM api_tokens WHERE token_hash = ?", (hash_secret(token),)
            ).fetchone()
            account_row = (
                row
                and conn.execute(
                    "SELECT * FROM accounts WHERE id = ?", (row["account_id"],)
                ).fetchone()
            )
        # An expired temporary account is deleted as of its expiry, whenever the sweep removes
        # its rows: its tokens get the answer of a token nobody knows, not a second one that
        # says the account is still there (the CLI explains expiry from what it cached).
        gone = (
            row is None
            or account_row is None
            or row["revoked_at"] is not None
            or _account(account_row).expired(now)
            or (row["expires_at"] is not None and now >= row["expires_at"])
        )
        if gone:
            raise Unauthenticated(TOKEN_NOT_VALID)
        account = _account(account_row)
        return account, ApiToken(row["id"], row["account_id"], row["created_at"], row["expires_at"])

    def get(self, account_id: str) -> Account:
        with self._db.reader() as conn:
            row = conn.execute("SELECT * FROM accounts WHERE id = ?", (account_id,)).fetchone()
        if row is None:
            raise InvalidRequest(f"no account with id {account_id!r}")
        return _account(row)

    def find(self, id_or_name: str) -> Account | None:
        with self._db.reader() as conn:
            row = conn.execute(
                "SELECT * FROM accounts WHERE id = ? OR name = ?", (id_or_name, id_or_name)
            ).fetchone()
        return _account(row) if row else None

    def list(self) -> list[Account]:
        with self._db.reader() as conn:
            rows = conn.execute("SELECT * FROM accounts ORDER BY created_at").fetchall()
        return [_account(r) for r in rows]

    def find_by_claim_token(self, claim_token: str) -> Account | None:
        """The unexpired, unclaimed account a claim token belongs to (for the claim page)."""
        with self._db.reader() as conn:
            row = conn.execute(
                "SELECT * FROM accounts WHERE claim_token_hash = ?",
                (hash_secret(claim_token or ""),),
            ).fetchone()
        account = _account(row) if row else None
        return account if account and not account.expired(self._clock()) else None

    # -- claim ----------------------------------------------------------------------------------

    def claim(self, claim_token: str, client: str) -> Claimed:
        """Make a temporary account permanent; its temporary tokens are replaced by a new one.

        Whoever holds the claim URL becomes the owner, as on Cloudflare: the deploying client's
        temporary token stops working and the claimer gets the only valid token. Cloudflare
        attaches a claim to a logged-in account; here a claim needs only the link, so each
        client address (``client``, as creations count it) makes at most
        ``platform.temporary.claims_per_day`` of them, and the operator may turn claims off.
        """
        if self._config.temporary.claim != "open":
            raise ClaimsTurnedOff()
        now = self._clock()
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM accounts WHERE claim_token_hash = ?",
                (hash_secret(claim_token or ""),),
            ).fetchone()
            if row is None:
                raise ClaimRejected("This claim link is not valid (already used, or mistyped).")
            account = _account(row)
            if account.expired(now):
                raise ClaimRejected(
                    f"Temporary account {account.name} expired before it was "
                    "claimed; its workers are deleted."
                )
            self._count_claim(conn, client, now)
            conn.execute(
                "UPDATE accounts SET kind = 'permanent', expires_at = NULL, claimed_at = ?, "
                "claim_token_hash = NULL WHERE id = ?",
                (now, account.id),
            )
            conn.execute(
                "UPDATE api_tokens SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL",
                (now, account.id),
            )
            # A tail's WebSocket URL is a capability got with a temporary token; the deployer
            # must not keep reading the claimer's logs through one after losing the token.
            tails = [
                r["id"]
                for r in conn.execute(
                    "SELECT t.id FROM tails t JOIN scripts s ON s.id = t.script_id "
                    "WHERE s.account_id = ?",
                    (account.id,),
                )
            ]
            conn.executemany("DELETE FROM tails WHERE id = ?", [(t,) for t in tails])
            token = _insert_token(conn, account.id, now, expires_at=None)
            row = conn.execute("SELECT * FROM accounts WHERE id = ?", (account.id,)).fetchone()
        return Claimed(account=_account(row), token=token, ended_tails=tuple(tails))

    def _count_claim(self, conn: sqlite3.Connection, client: str, now: float) -> None:
        """Record ``client``'s claim, or raise ``RateLimited`` when its window is full (in the
        claim's own transaction: a refused claim counts nothing and changes nothing)."""
        limit = self._config.temporary.claims_per_day
        recent, oldest = conn.execute(
            "SELECT COUNT(*), MIN(claimed_at) FROM account_claims WHERE client = ? "
            "AND claimed_at > ?",
            (client, now - CLAIM_WINDOW),
        ).fetchone()
        if recent >= limit:
            resets = oldest + CLAIM_WINDOW
            at = datetime.fromtimestamp(resets, UTC).isoformat(timespec="seconds")
            raise RateLimited(
                "claims_per_day",
                recent + 1,
                limit,
                f"This client claimed {recent} temporary accounts in the last 24 hours; the "
                f"limit is {limit} (platform.temporary.claims_per_day); it can claim again "
                f"at {at.replace('+00:00', 'Z')}. To keep workers before then, ask the "
                "platform's operator for an account.",
                retry_after=resets - now,
            )
        conn.execute("INSERT INTO account_claims VALUES (?, ?)", (client, now))


def _fresh_name(conn: sqlite3.Connection) -> str:
    for _ in range(100):
        name = (
            f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_ANIMALS)}-"
            f"{secrets.randbelow(10000):04d}"
        )
        if not conn.execute("SELECT 1 FROM accounts WHERE name = ?", (name,)).fetchone():
            return name
    return f"temporary-{secrets.token_hex(6)}"


def _insert_account(conn: sqlite3.Connection, account: Account, claim_hash: str | None) -> None:
    conn.execute(
        "INSERT INTO accounts (id, name, kind, email, created_at, expires_at, claimed_at, "
        "claim_token_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            account.id,
            account.name,
            account.kind,
            account.email,
            account.created_at,
            account.expires_at,
            account.claimed_at,
            claim_hash,
        ),
    )


def _insert_token(
    conn: sqlite3.Connection, account_id: str, now: float, expires_at: float | None
) -> IssuedToken:
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(30)
    record = ApiToken(uuid.uuid4().hex, account_id, now, expires_at)
    conn.execute(
        "INSERT INTO api_tokens (id, account_id, token_hash, created_at, expires_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (record.id, account_id, hash_secret(plaintext), now, expires_at),
    )
    return IssuedToken(token=plaintext, record=record)


def _account(row: sqlite3.Row) -> Account:
    return Account(
        row["id"],
        row["name"],
        row["kind"],
        row["email"],
        row["created_at"],
        row["expires_at"],
        row["claimed_at"],
        row["deleted_at"],
    )
