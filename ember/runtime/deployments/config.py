"""The ``platform:`` section of ember.yaml: TTLs, limits and proof-of-work difficulty.

The runtime owns ember.yaml for worker projects; this module parses only the ``platform`` mapping
(from a file or an already-loaded dict) into a typed, frozen ``PlatformConfig``. Unknown keys are
errors that list the keys we know, so a typo never silently leaves a limit at its default.

    platform:
      public_url: http://127.0.0.1:8787     # used in claim links; default: the request's own URL
      max_script_size: 64MiB                # every account's (temporary: the lower of the two)
      versions_kept_per_worker: 100         # each Worker's newest versions (and the deployed
                                            # ones) are kept, older ones pruned at the next
                                            # upload (temporary: the lower of the two)
      max_isolates: 16                      # live isolates of all accounts together; at the cap
                                            # the least recently used idle one is stopped, else
                                            # 503 (default: one per 256 MiB of RAM, or of the
                                            # cgroup's memory limit where lower; at least 4)
      proof_of_work: {k: 2000, g: 500, sample: 16}
      accounts:                             # each permanent (created or claimed) account's
                                            # caps; null: no limit (defaults and their sources:
                                            # PermanentAccountConfig; platform.cpu_ms_per_request
                                            # is the older name of accounts.cpu_ms_per_request)
        max_workers: 500
        max_versions: 10000                 # kept versions across all its workers
        max_stored_script_bytes: 1GiB       # script bytes of those kept versions
        max_stored_asset_bytes: 1GiB        # its static asset files (checked at each upload
                                            # session and upload; files no kept version uses
                                            # are deleted when versions are pruned)
        max_kv_bytes: 1GiB                  # keys + values + metadata + 64 per key
        max_kv_namespaces: 1000
        kv_reads_per_day: null              # KV operations per UTC day (null: no limit;
        kv_writes_per_day: null             # past one, 429 as on Workers Free)
        kv_deletes_per_day: null
        kv_lists_per_day: null
        ai_requests_per_minute: 300
        ai_running_share: 0.5               # of each model's running slots (null: every one);
                                            # past it the account's requests wait
        ai_neurons_per_day: null            # Workers AI neurons per UTC day (null: no limit)
        isolate_share: 0.5                  # of max_isolates (null: all); its own least
                                            # recently used idle one makes room, else 503
        cpu_ms_per_request: 300000          # also the most a version's limits.cpu_ms may be
      temporary:
        ttl: 60m
        creations_per_client_per_hour: 10
        claim: open                         # off: nobody can claim (deleted at expiry)
        claims_per_day: 3                   # claims per client address in any 24 hours
        max_workers: 5
        max_versions: 50
        versions_kept_per_worker: 10        # max_versions / max_workers
        max_script_size: 5MiB
        max_stored_script_bytes: 250MiB     # max_versions x max_script_size
        max_total_stored_bytes: 20GiB       # all temporary accounts together: their versions'
                                            # script bytes and KV bytes (default: a quarter of
                                            # the state dir's free disk when ember serve starts)
        max_kv_bytes: 10MiB                  # keys + values + metadata + 64 per key
        max_kv_namespaces: 5
        kv_reads_per_day: 100000            # Workers KV's Free plan, reset at 00:00 UTC
        kv_writes_per_day: 1000
        kv_deletes_per_day: 1000
        kv_lists_per_day: 1000
        ai_requests_per_minute: 60
        ai_running_share: 0.25
        ai_neurons_per_day: 10000           # Workers AI's free allocation; past it 3036
        isolate_share: 0.1                  # each temporary account's part of max_isolates
        total_isolate_share: 0.25           # all temporary accounts' part, together
        cpu_ms_per_request: 50
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.config_yaml import load_yaml
from ember.errors import ConfigError
from ember.runtime.deployments.account_config import CPU_MS_MAX as CPU_MS_MAX
from ember.runtime.deployments.account_config import AccountLimits as AccountLimits
from ember.runtime.deployments.account_config import (
    PermanentAccountConfig,
    TemporaryAccountConfig,
    parse_accounts,
    parse_temporary,
)
from ember.runtime.deployments.config_parse import (
    duration_value,
    mapping,
    only_keys,
    optional_int,
    positive_int,
    size_value,
)
from ember.runtime.deployments.config_parse import parse_duration as parse_duration
from ember.runtime.deployments.config_parse import parse_size as parse_size

# Wrangler refuses challenges above this many hashes (POW_MAX_ITERATIONS in workers-auth/pow.ts).
WRANGLER_MAX_POW_ITERATIONS = 64_000_000


@dataclass(frozen=True)
class ProofOfWorkConfig:
    """Difficulty of the temporary-account challenge (cloudflare-api.md §4.2).

    The client does ``k * g`` sequential SHA-256 hashes; the server checks ``sample`` random
    segments of ``g`` hashes each, so verification costs ``sample * g`` hashes.
    """

    # 1M hashes: about 1 s for wrangler on a laptop (cloudflare-api.md §4.2), 6 s on the 2-core
    # test box. Short segments make each sampled check cheap: 16 x 500 hashes stay under 10 ms
    # (BENCHMARKS.md, "Platform").
    k: int = 2000
    g: int = 500
    sample: int = 16
    challenge_ttl_seconds: int = 600


@dataclass(frozen=True)
class PlatformConfig:
    """Everything the control plane reads from the ``platform:`` section."""

    public_url: str | None = None
    max_script_bytes: int = 64 * 1024**2
    # Cloudflare's rollback window: "Promote any of the 100 most recent versions" (changelog
    # 2025-09-11). Older versions are pruned, except those of the live deployment.
    versions_kept_per_worker: int = 100
    max_isolates: int | None = None  # None: capacity.default_max_isolates() for this machine
    proof_of_work: ProofOfWorkConfig = field(default_factory=ProofOfWorkConfig)
    temporary: TemporaryAccountConfig = field(default_factory=TemporaryAccountConfig)
    accounts: PermanentAccountConfig = field(default_factory=PermanentAccountConfig)

    def limits_for(self, temporary: bool) -> AccountLimits:
        if temporary:
            t = self.temporary
            return AccountLimits(
                max_workers=t.max_workers,
                max_versions=t.max_versions,
                max_script_bytes=min(t.max_script_bytes, self.max_script_bytes),
                max_stored_script_bytes=t.max_stored_script_bytes,
                versions_kept_per_worker=min(
                    t.versions_kept_per_worker, self.versions_kept_per_worker
                ),
                max_kv_bytes=t.max_kv_bytes,
                max_kv_namespaces=t.max_kv_namespaces,
                ai_requests_per_minute=t.ai_requests_per_minute,
                cpu_ms_per_request=t.cpu_ms_per_request,
                temporary=True,
                ai_running_share=t.ai_running_share,
                isolate_share=t.isolate_share,
                total_isolate_share=t.total_isolate_share,
                claimable=t.claim == "open",
                kv_reads_per_day=t.kv_reads_per_day,
                kv_writes_per_day=t.kv_writes_per_day,
                kv_deletes_per_day=t.kv_deletes_per_day,
                kv_lists_per_day=t.kv_lists_per_day,
                ai_neurons_per_day=t.ai_neurons_per_day,
            )
        a = self.accounts
        return AccountLimits(
            max_workers=a.max_workers,
            max_versions=a.max_versions,
            max_script_bytes=self.max_script_bytes,
            max_stored_script_bytes=a.max_stored_script_bytes,
            max_stored_asset_bytes=a.max_stored_asset_bytes,
            versions_kept_per_worker=self.versions_kept_per_worker,
            max_kv_bytes=a.max_kv_bytes,
            max_kv_namespaces=a.max_kv_namespaces,
            ai_requests_per_minute=a.ai_requests_per_minute,
            cpu_ms_per_request=a.cpu_ms_per_request,
            ai_running_share=a.ai_running_share,
            kv_reads_per_day=a.kv_reads_per_day,
            kv_writes_per_day=a.kv_writes_per_day,
            kv_deletes_per_day=a.kv_deletes_per_day,
            kv_lists_per_day=a.kv_lists_per_day,
            ai_neurons_per_day=a.ai_neurons_per_day,
            isolate_share=a.isolate_share,
        )


def load_platform_config(path: Path) -> PlatformConfig:
    """Read ``path`` (an ember.yaml) and parse its ``platform`` section; absent -> defaults."""
    document = load_yaml(path.read_text(encoding="utf-8", errors="replace"), str(path)) or {}
    if not isinstance(document, dict):
        raise ConfigError(str(path), None, type(document).__name__, "a mapping at the top level")
    return parse_platform_config(document.get("platform") or {}, source=str(path))


def parse_platform_config(section: Any, source: str = "ember.yaml") -> PlatformConfig:
    """Parse an already-loaded ``platform`` mapping."""
    raw = mapping(section, source, "platform")
    only_keys(
        raw,
        source,
        "platform",
        {
            "public_url",
            "max_script_size",
            "versions_kept_per_worker",
            "cpu_ms_per_request",
            "max_isolates",
            "proof_of_work",
            "temporary",
            "accounts",
        },
    )
    pow_raw = mapping(raw.get("proof_of_work", {}), source, "platform.proof_of_work")
    tmp_raw = mapping(raw.get("temporary", {}), source, "platform.temporary")
    accounts_raw = mapping(raw.get("accounts", {}), source, "platform.accounts")
    proof = _parse_proof_of_work(pow_raw, source)
    temporary = parse_temporary(tmp_raw, source)
    accounts = parse_accounts(accounts_raw, source)
    if raw.get("cpu_ms_per_request") is not None:
        # The older spelling of accounts.cpu_ms_per_request, from before the accounts section.
        if "cpu_ms_per_request" in accounts_raw:
            raise ConfigError(
                source,
                "platform.cpu_ms_per_request",
                raw["cpu_ms_per_request"],
                "no value beside platform.accounts.cpu_ms_per_request",
                hint="it is the older name of platform.accounts.cpu_ms_per_request: keep one",
            )
        cpu = optional_int(raw, "cpu_ms_per_request", source, "platform")
        accounts = dataclasses.replace(accounts, cpu_ms_per_request=cpu)
    public_url = raw.get("public_url")
    if public_url is not None and not (
        isinstance(public_url, str) and re.match(r"^https?://[^/\s]+/?$", public_url)
    ):
        raise ConfigError(source, "platform.public_url", public_url, "an http(s) origin")
    config = PlatformConfig(
        public_url=public_url.rstrip("/") if public_url else None,
        max_script_bytes=size_value(
            raw, "max_script_size", PlatformConfig.max_script_bytes, source, "platform"
        ),
        versions_kept_per_worker=positive_int(
            raw,
            "versions_kept_per_worker",
            PlatformConfig.versions_kept_per_worker,
            source,
            "platform",
        ),
        max_isolates=optional_int(raw, "max_isolates", source, "platform"),
        proof_of_work=proof,
        temporary=temporary,
        accounts=accounts,
    )
    return config


def _parse_proof_of_work(raw: dict[str, Any], source: str) -> ProofOfWorkConfig:
    where = "platform.proof_of_work"
    only_keys(raw, source, where, {"k", "g", "sample", "challenge_ttl"})
    defaults = ProofOfWorkConfig()
    k = positive_int(raw, "k", defaults.k, source, where)
    g = positive_int(raw, "g", defaults.g, source, where)
    if k * g > WRANGLER_MAX_POW_ITERATIONS:
        raise ConfigError(
            source,
            f"{where}.k*g",
            k * g,
            f"at most {WRANGLER_MAX_POW_ITERATIONS:,} hashes",
            hint="wrangler refuses harder challenges",
        )
    return ProofOfWorkConfig(
        k=k,
        g=g,
        sample=min(positive_int(raw, "sample", defaults.sample, source, where), k),
        challenge_ttl_seconds=duration_value(
            raw, "challenge_ttl", defaults.challenge_ttl_seconds, source, where
        ),
    )


def default_state_dir() -> Path:
    """Where a platform keeps its state: ``$EMBER_STATE_DIR``, else
    ``$XDG_DATA_HOME/ember/platform`` (``~/.local/share`` when unset)."""
    explicit = os.environ.get("EMBER_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ember" / "platform"
