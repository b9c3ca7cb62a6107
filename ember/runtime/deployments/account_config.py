"""Each account kind's caps: ``platform.temporary`` and ``platform.accounts`` parsed into
their dataclasses, and ``AccountLimits``, the caps that apply to one account
(``PlatformConfig.limits_for`` picks them). ``config.py`` owns the rest of ``platform:``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ember.bindings.kv.daily import KVAllowances
from ember.config_values import LIMIT_KEYS
from ember.errors import ConfigError
from ember.runtime.deployments.config_parse import (
    duration_value,
    only_keys,
    positive_int,
    size_value,
)

# The most CPU a request may have: Workers Paid's 5 minutes (wrangler's limits.cpu_ms maximum).
CPU_MS_MAX = LIMIT_KEYS["cpu_ms"][1]
CLAIM_MODES = ("open", "off")
# Daily KV operation allowances (``ember.bindings.kv.daily``), by config key.
KV_DAILY_KEYS = ("kv_reads_per_day", "kv_writes_per_day", "kv_deletes_per_day", "kv_lists_per_day")
# What a temporary account's user is told where claiming would have been the way out.
CLAIM_OFF_REMEDY = (
    "ask the platform's operator for an account (claiming temporary accounts is turned off "
    "on this platform)"
)


@dataclass(frozen=True)
class TemporaryAccountConfig:
    """Lifetime and hard caps of accounts made by ``deploy --temporary``."""

    ttl_seconds: int = 3600
    creations_per_client_per_hour: int = 10
    # "open": whoever holds a claim link makes the account permanent (Cloudflare's claim);
    # "off": nobody can, and the account is deleted at its expiry (an operator who hands out
    # permanent accounts himself).
    claim: str = "open"
    # Claims per client address in any 24 hours: a claim needs no login, only the link, so
    # without it one client made creations_per_client_per_hour accounts an hour and claimed
    # each, ~20 GiB of permanent quota an hour (platform.accounts' caps for each).
    claims_per_day: int = 3
    max_workers: int = 5
    # Versions stored across all its workers: each is up to max_script_bytes in the database and
    # again on disk, so without this cap max_workers x max_script_bytes bounded nothing.
    max_versions: int = 50
    # max_versions / max_workers, so that no worker's history alone fills the account's
    # max_versions: an agent redeploying one worker all hour is never refused for it.
    versions_kept_per_worker: int = 10
    max_script_bytes: int = 5 * 1024**2
    # max_versions x max_script_bytes: the bound those two already set, named so that an
    # operator can lower it without lowering either.
    max_stored_script_bytes: int = 250 * 1024**2
    # What all temporary accounts together may store: their kept versions' script bytes and
    # their KV bytes. The caps above bound one account (~260 MiB, and its versions are on disk
    # twice: platform.db and the copy under accounts/), and anyone may make accounts, so nothing
    # bounded temporary storage as a whole. None: a quarter of the state directory's free disk
    # when ember serve starts (``temporary_total.py``): with the second copy, temporary
    # accounts then fill at most about half of it, and the rest stays for permanent accounts,
    # the write-ahead logs and the machine.
    max_total_stored_bytes: int | None = None
    max_kv_bytes: int = 10 * 1024**2
    max_kv_namespaces: int = 5
    # KV operations per UTC day, Workers KV's Free plan (developers.cloudflare.com/kv/platform/
    # pricing: 100,000 reads, 1,000 each of writes, deletes and lists; reset at 00:00 UTC). All
    # accounts share one KV file: without them one account's write flood slowed everybody's KV.
    kv_reads_per_day: int = 100_000
    kv_writes_per_day: int = 1_000
    kv_deletes_per_day: int = 1_000
    kv_lists_per_day: int = 1_000
    ai_requests_per_minute: int = 60
    # The part of each model's running slots one temporary account's requests may hold: less
    # than a permanent account's, as anyone can make one (see PermanentAccountConfig).
    ai_running_share: float = 0.25
    # Workers AI's free daily allocation (workers-api.md §1.9: 10,000 neurons, reset at 00:00
    # UTC; then 3036): the running share bounds an account's slots, this its compute; one
    # temporary account's ignore_eos requests held a replica for minutes without it.
    ai_neurons_per_day: int = 10_000
    # The part of platform.max_isolates one temporary account's isolates may hold (rounded
    # down, at least one; idle ones included, as any of them can turn busy without starting):
    # at the cap of a 24 GiB box (94) that is 9, room for the live versions of its 5 workers
    # (max_workers) before it evicts its own; on the smallest default cap (4), one.
    isolate_share: float = 0.1
    # The part all temporary accounts together may hold. Anyone can make one (a client 10 an
    # hour, creations_per_client_per_hour, each with 5 workers and 2 live versions of each:
    # walk18 held 100 busy isolates from one address at no CPU cost), so whatever anonymous
    # clients do, three quarters of the isolates stay for permanent accounts; with
    # isolate_share 0.1 it takes three temporary accounts to fill this part.
    total_isolate_share: float = 0.25
    cpu_ms_per_request: int = 50


@dataclass(frozen=True)
class PermanentAccountConfig:
    """Caps of each permanent (created or claimed) account; ``None`` = unlimited.

    Without them one account could fill the platform's disk with KV data or stored versions and
    cost every other account its writes. The defaults are Cloudflare's published plan limits
    (reference/workers-api.md §5.1) where it has one, so a wrangler project that deploys there
    deploys here.
    """

    # Workers per account on Workers Paid (Free: 100).
    max_workers: int | None = 500
    # Versions kept across all its Workers (each Worker keeps its newest
    # PlatformConfig.versions_kept_per_worker, so history alone never reaches this): 100 for
    # each of Workers Free's 100 Workers. Cloudflare has no account-wide cap.
    max_versions: int | None = 10_000
    # Script bytes of those kept versions (each is stored in the database and again on disk).
    # Without it the account's disk was bounded only by max_versions x max_script_size (640 GiB).
    # 1 GiB, the same share of disk as max_kv_bytes, is generous: 100 versions of ten 1 MiB
    # Workers; a refusal names it, the bytes used and how to free space.
    max_stored_script_bytes: int | None = 1024**3
    # Bytes of its static asset files (each stored once per account, whichever versions use
    # them). Cloudflare bounds assets per version only (100,000 files of 25 MiB: 2.4 TiB), which
    # a shared disk cannot hold; without this an account uploaded new manifests until the disk
    # was full and other tenants' KV writes and deploys failed. 1 GiB, the same share of disk as
    # max_stored_script_bytes and max_kv_bytes, holds a large site; a refusal names it, the
    # bytes used and how to free space (the files no kept version uses are deleted with it).
    max_stored_asset_bytes: int | None = 1024**3
    # KV storage per account on Workers Free (developers.cloudflare.com/kv/platform/limits: 1 GB;
    # Paid: unlimited, billed per GB-month, which a shared disk cannot be).
    max_kv_bytes: int | None = 1024**3
    # KV namespaces per account on Free and Paid (the same KV limits page).
    max_kv_namespaces: int | None = 1000
    # KV operations per UTC day: Workers Paid has none (it bills them), and neither has a
    # permanent account here unless its operator sets one.
    kv_reads_per_day: int | None = None
    kv_writes_per_day: int | None = None
    kv_deletes_per_day: int | None = None
    kv_lists_per_day: int | None = None
    # Workers AI's text-generation rate per account (workers-api.md §5.1: 300 per minute);
    # every model ember serves (Kimi, GLM) is text generation.
    ai_requests_per_minute: int | None = 300
    # The part of each model's running slots one account's requests may hold at once (null:
    # every slot). Workers AI publishes per-minute rates only (workers-api.md §5.1) and
    # answers a full model with 3040; on a shared box a rate does not stop one account from
    # holding every slot with long streams, so half of them stay for the others.
    ai_running_share: float | None = 0.5
    # Neurons per UTC day (ember.bindings.ai.neurons): Workers Paid bills past the free 10,000
    # rather than refusing, so none by default.
    ai_neurons_per_day: int | None = None
    # The part of platform.max_isolates one account's isolates may hold (null: all of them;
    # rounded down, at least one). Cloudflare runs a worker wherever it has room and publishes
    # no such limit; on one box an isolate busy with a request cannot be stopped for another,
    # so without it one account's long requests (no CPU: an await) could hold every isolate
    # and the others got 503 until it let go. Half, as ai_running_share: one account cannot
    # take every isolate, and with temporary accounts at their total_isolate_share (0.25) a
    # quarter still stays for the other permanent accounts.
    isolate_share: float | None = 0.5
    # Workers Paid's most CPU per invocation, 5 minutes (wrangler's limits.cpu_ms maximum).
    cpu_ms_per_request: int | None = CPU_MS_MAX


@dataclass(frozen=True)
class AccountLimits:
    """The limits that apply to one account (``None`` = unlimited)."""

    max_workers: int | None
    max_versions: int | None
    max_script_bytes: int
    max_stored_script_bytes: int | None
    versions_kept_per_worker: int
    max_kv_bytes: int | None
    max_kv_namespaces: int | None
    ai_requests_per_minute: int | None
    cpu_ms_per_request: int | None
    temporary: bool = False
    ai_running_share: float | None = None  # None: an account may run on every slot
    kv_reads_per_day: int | None = None  # None: no daily allowance (and likewise below)
    kv_writes_per_day: int | None = None
    kv_deletes_per_day: int | None = None
    kv_lists_per_day: int | None = None
    ai_neurons_per_day: int | None = None  # None: Workers AI neurons without a daily limit
    isolate_share: float | None = None  # of platform.max_isolates; None: every isolate
    total_isolate_share: float | None = None  # all temporary accounts' together (temporary)
    claimable: bool = True  # a temporary account that can be claimed (platform.temporary.claim)
    # Bytes of the account's static asset files; None: no bound of its own (a temporary
    # account's count in platform.temporary.max_total_stored_bytes).
    max_stored_asset_bytes: int | None = None

    def kv_allowances(self) -> KVAllowances:
        """The account's KV operations per UTC day (``ember.bindings.kv.daily``)."""
        return KVAllowances(
            reads=self.kv_reads_per_day,
            writes=self.kv_writes_per_day,
            deletes=self.kv_deletes_per_day,
            lists=self.kv_lists_per_day,
        )

    @property
    def scope(self) -> str:
        """Whom these limits apply to, for a refusal's message."""
        return "temporary accounts" if self.temporary else "accounts on this platform"

    def remedy(self, key: str) -> str:
        """How the account gets past the limit ``key``, for the end of a refusal's message."""
        if self.temporary:
            if self.claimable:
                return "claim the account"
            return CLAIM_OFF_REMEDY
        return f"ask the platform's operator to raise platform.accounts.{key} in its ember.yaml"


def parse_temporary(raw: dict[str, Any], source: str) -> TemporaryAccountConfig:
    where = "platform.temporary"
    d = TemporaryAccountConfig()
    names = {f.name for f in dataclasses.fields(TemporaryAccountConfig)}
    renamed = {"ttl_seconds": "ttl", "max_script_bytes": "max_script_size"}
    allowed = {renamed.get(n, n) for n in names}
    only_keys(raw, source, where, allowed)
    return TemporaryAccountConfig(
        ttl_seconds=duration_value(raw, "ttl", d.ttl_seconds, source, where),
        creations_per_client_per_hour=positive_int(
            raw, "creations_per_client_per_hour", d.creations_per_client_per_hour, source, where
        ),
        claim=claim_mode(raw, d.claim, source, where),
        claims_per_day=positive_int(raw, "claims_per_day", d.claims_per_day, source, where),
        max_workers=positive_int(raw, "max_workers", d.max_workers, source, where),
        max_versions=positive_int(raw, "max_versions", d.max_versions, source, where),
        versions_kept_per_worker=positive_int(
            raw, "versions_kept_per_worker", d.versions_kept_per_worker, source, where
        ),
        max_script_bytes=size_value(raw, "max_script_size", d.max_script_bytes, source, where),
        max_stored_script_bytes=size_value(
            raw, "max_stored_script_bytes", d.max_stored_script_bytes, source, where
        ),
        max_total_stored_bytes=(
            size_value(raw, "max_total_stored_bytes", 1, source, where)
            if raw.get("max_total_stored_bytes") is not None
            else None
        ),
        max_kv_bytes=size_value(raw, "max_kv_bytes", d.max_kv_bytes, source, where),
        max_kv_namespaces=positive_int(
            raw, "max_kv_namespaces", d.max_kv_namespaces, source, where
        ),
        **{key: positive_int(raw, key, getattr(d, key), source, where) for key in KV_DAILY_KEYS},
        ai_requests_per_minute=positive_int(
            raw, "ai_requests_per_minute", d.ai_requests_per_minute, source, where
        ),
        ai_running_share=share_value(raw, "ai_running_share", d.ai_running_share, source, where),
        ai_neurons_per_day=positive_int(
            raw, "ai_neurons_per_day", d.ai_neurons_per_day, source, where
        ),
        isolate_share=share_value(raw, "isolate_share", d.isolate_share, source, where),
        total_isolate_share=share_value(
            raw, "total_isolate_share", d.total_isolate_share, source, where
        ),
        cpu_ms_per_request=positive_int(
            raw, "cpu_ms_per_request", d.cpu_ms_per_request, source, where
        ),
    )


def parse_accounts(raw: dict[str, Any], source: str) -> PermanentAccountConfig:
    """``platform.accounts``: each key absent -> its default, ``null`` -> unlimited."""
    where = "platform.accounts"
    if "max_script_size" in raw:
        raise ConfigError(
            source,
            f"{where}.max_script_size",
            raw["max_script_size"],
            "no max_script_size here",
            hint="every account's script size is platform.max_script_size",
        )
    if "versions_kept_per_worker" in raw:
        raise ConfigError(
            source,
            f"{where}.versions_kept_per_worker",
            raw["versions_kept_per_worker"],
            "no versions_kept_per_worker here",
            hint="every account's Workers keep platform.versions_kept_per_worker versions",
        )
    d = PermanentAccountConfig()
    only_keys(raw, source, where, {f.name for f in dataclasses.fields(PermanentAccountConfig)})

    def count(key: str, default: int | None) -> int | None:
        if key not in raw:
            return default
        return None if raw[key] is None else positive_int(raw, key, 1, source, where)

    def size(key: str, default: int | None) -> int | None:
        if key not in raw:
            return default
        return None if raw[key] is None else size_value(raw, key, 1, source, where)

    cpu = count("cpu_ms_per_request", d.cpu_ms_per_request)
    if cpu is not None and cpu > CPU_MS_MAX:
        raise ConfigError(
            source,
            f"{where}.cpu_ms_per_request",
            cpu,
            f"at most {CPU_MS_MAX} (5 minutes)",
            hint="no version may set limits.cpu_ms above Workers Paid's maximum",
        )
    return PermanentAccountConfig(
        max_workers=count("max_workers", d.max_workers),
        max_versions=count("max_versions", d.max_versions),
        max_stored_script_bytes=size("max_stored_script_bytes", d.max_stored_script_bytes),
        max_stored_asset_bytes=size("max_stored_asset_bytes", d.max_stored_asset_bytes),
        max_kv_bytes=size("max_kv_bytes", d.max_kv_bytes),
        max_kv_namespaces=count("max_kv_namespaces", d.max_kv_namespaces),
        **{key: count(key, getattr(d, key)) for key in KV_DAILY_KEYS},
        ai_requests_per_minute=count("ai_requests_per_minute", d.ai_requests_per_minute),
        ai_running_share=share_or_null(raw, "ai_running_share", d.ai_running_share, source, where),
        ai_neurons_per_day=count("ai_neurons_per_day", d.ai_neurons_per_day),
        isolate_share=share_or_null(raw, "isolate_share", d.isolate_share, source, where),
        cpu_ms_per_request=cpu,
    )


def claim_mode(raw: dict[str, Any], default: str, source: str, where: str) -> str:
    """``open`` or ``off``; YAML 1.1 reads an unquoted ``off`` (or ``no``) as false."""
    value = raw.get("claim", default)
    if value is False:
        return "off"
    if value not in CLAIM_MODES:
        raise ConfigError(source, f"{where}.claim", value, "open or off")
    return str(value)


def share_value(
    raw: dict[str, Any], key: str, default: float | None, source: str, where: str
) -> float:
    """A part of a whole: a number above 0 and at most 1."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(source, f"{where}.{key}", value, "a number above 0 and at most 1")
    return float(value)


def share_or_null(
    raw: dict[str, Any], key: str, default: float | None, source: str, where: str
) -> float | None:
    """``share_value``, or None where the key is ``null`` (a permanent account's: no cap)."""
    if key in raw and raw[key] is None:
        return None
    return share_value(raw, key, default, source, where)
