"""Typed records of the control plane: what the stores return and the API serialises.

Secrets never appear in a record's ``repr``: values live only in ``SecretValue.value``, whose field
is excluded from repr, so logging a record cannot leak one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

AccountKind = Literal["permanent", "temporary"]


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    kind: AccountKind
    email: str
    created_at: float
    expires_at: float | None
    claimed_at: float | None
    deleted_at: float | None = None  # when the expiry sweep began deleting it (gc.py)

    @property
    def temporary(self) -> bool:
        return self.kind == "temporary"

    def expired(self, now: float) -> bool:
        """Gone: past its expiry, or being deleted (even if the clock stepped back since)."""
        return self.deleted_at is not None or (
            self.expires_at is not None and now >= self.expires_at
        )


@dataclass(frozen=True)
class ApiToken:
    id: str
    account_id: str
    created_at: float
    expires_at: float | None


@dataclass(frozen=True)
class IssuedToken:
    """A freshly minted token: the plaintext exists only here, once; the store keeps a hash."""

    token: str = field(repr=False)
    record: ApiToken


@dataclass(frozen=True)
class TemporaryAccount:
    """What ``POST /provisioning/previews`` hands back (cloudflare-api.md §4.1)."""

    account: Account
    token: IssuedToken
    claim_token: str = field(repr=False)


@dataclass(frozen=True)
class Claimed:
    """A claimed account and the permanent token that replaces its temporary ones."""

    account: Account
    token: IssuedToken
    # Tail sessions opened with the temporary tokens: ended by the claim, like the tokens.
    ended_tails: tuple[str, ...] = ()


@dataclass(frozen=True)
class Module:
    """One uploaded file of a worker version, named by its path relative to the module root."""

    name: str
    content_type: str
    content: bytes = field(repr=False)

    @property
    def importable_python(self) -> bool:
        """Python source the isolate may import: ``.py`` files and everything in python_modules/.

        wrangler sends vendored packages as application/octet-stream (even ``.py`` files), so
        the content type cannot decide this (cloudflare-api.md §2.2).
        """
        return (
            self.content_type == "text/x-python"
            or self.name.endswith(".py")
            or self.name.startswith("python_modules/")
        )


@dataclass(frozen=True)
class Binding:
    """A non-secret binding as Cloudflare spells it: ``{"name", "type", ...config}``."""

    name: str
    type: str
    config: dict[str, Any] = field(default_factory=dict)

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, **self.config}


@dataclass(frozen=True)
class SecretValue:
    name: str
    type: str
    value: str = field(repr=False)


@dataclass(frozen=True)
class Script:
    id: str
    account_id: str
    name: str
    created_on: float
    modified_on: float
    last_deployed_from: str
    subdomain_enabled: bool
    previews_enabled: bool
    settings: dict[str, Any]


@dataclass(frozen=True)
class Version:
    """An immutable worker version. Secrets are listed by name and type only."""

    id: str
    script_id: str
    number: int
    created_on: float
    source: str
    main_module: str
    compatibility_date: str | None
    compatibility_flags: tuple[str, ...]
    bindings: tuple[Binding, ...]
    secret_names: tuple[tuple[str, str], ...]
    annotations: dict[str, str]
    metadata: dict[str, Any]
    etag: str
    size: int  # module bytes: the Worker's size, as max_script_size counts it
    # Everything the version stores (modules, metadata, secrets): max_stored_script_bytes.
    stored_bytes: int = 0


@dataclass(frozen=True)
class DeploymentTarget:
    version_id: str
    percentage: float


@dataclass(frozen=True)
class Deployment:
    id: str
    script_id: str
    seq: int
    created_on: float
    source: str
    strategy: str
    versions: tuple[DeploymentTarget, ...]
    annotations: dict[str, str]
    author_email: str


@dataclass(frozen=True)
class KVNamespace:
    id: str
    account_id: str
    title: str
    created_at: float


@dataclass(frozen=True)
class Tail:
    id: str
    script_id: str
    created_at: float
    expires_at: float
    filters: tuple[dict[str, Any], ...]
    # On creation: older sessions of the worker this one replaced (their sockets are closed).
    ended: tuple[str, ...] = ()
    # On opening: when the worker's account expires (a temporary account's; None for a
    # permanent one). Its sockets close then, whenever the sweep deletes the account.
    account_expires_at: float | None = None


@dataclass(frozen=True)
class WorkerUpload:
    """A parsed multipart upload: validated metadata plus the modules, before any state changes."""

    main_module: str
    modules: tuple[Module, ...]
    bindings: tuple[dict[str, Any], ...]
    compatibility_date: str | None
    compatibility_flags: tuple[str, ...]
    keep_bindings: tuple[str, ...]
    keep_vars: bool
    annotations: dict[str, str]
    extra_metadata: dict[str, Any]

    @property
    def size(self) -> int:
        return sum(len(m.content) for m in self.modules)
