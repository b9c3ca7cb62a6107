"""The ``platform:`` section of ember.yaml: TTLs, limits and proof-of-work difficulty.

The runtime owns ember.yaml for worker projects; this module parses only the ``platform`` mapping
(from a file or an already-loaded dict) into a typed, frozen ``PlatformConfig``. Unknown keys are
errors that list the keys we know, so a typo never silently leaves a limit at its default.

    platform:
      public_url: http://127.0.0.1:8787     # used in claim links; default: the request's own URL
      max_script_size: 64MiB
      cpu_ms_per_request: 300000            # the most a permanent account's limits.cpu_ms may be
      max_isolates: 16                      # live isolates of all accounts together; at the cap
                                            # the least recently used idle one is stopped, else
                                            # 503 (default: one per 256 MiB of RAM, or of the
                                            # cgroup's memory limit where lower; at least 4)
      proof_of_work: {k: 2000, g: 500, sample: 16}
      temporary:
        ttl: 60m
        creations_per_client_per_hour: 10
        max_workers: 5
        max_versions: 50
        max_script_size: 5MiB
        max_kv_bytes: 10MiB                  # keys + values + metadata + 64 per key
        max_kv_namespaces: 5
        ai_requests_per_minute: 60
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

# Wrangler refuses challenges above this many hashes (POW_MAX_ITERATIONS in workers-auth/pow.ts).
WRANGLER_MAX_POW_ITERATIONS = 64_000_000

_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3}
_SIZE_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3}
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


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
class TemporaryAccountConfig:
    """Lifetime and hard caps of accounts made by ``deploy --temporary``."""

    ttl_seconds: int = 3600
    creations_per_client_per_hour: int = 10
    max_workers: int = 5
    # Versions stored across all its workers: each is up to max_script_bytes in the database and
    # again on disk, so without this cap max_workers x max_script_bytes bounded nothing.
    max_versions: int = 50
    max_script_bytes: int = 5 * 1024**2
    max_kv_bytes: int = 10 * 1024**2
    max_kv_namespaces: int = 5
    ai_requests_per_minute: int = 60
    cpu_ms_per_request: int = 50


@dataclass(frozen=True)
class AccountLimits:
    """The limits that apply to one account (``None`` = unlimited)."""

    max_workers: int | None
    max_versions: int | None
    max_script_bytes: int
    max_kv_bytes: int | None
    max_kv_namespaces: int | None
    ai_requests_per_minute: int | None
    cpu_ms_per_request: int | None


@dataclass(frozen=True)
class PlatformConfig:
    """Everything the control plane reads from the ``platform:`` section."""

    public_url: str | None = None
    max_script_bytes: int = 64 * 1024**2
    cpu_ms_per_request: int | None = None
    max_isolates: int | None = None  # None: capacity.default_max_isolates() for this machine
    proof_of_work: ProofOfWorkConfig = field(default_factory=ProofOfWorkConfig)
    temporary: TemporaryAccountConfig = field(default_factory=TemporaryAccountConfig)

    def limits_for(self, temporary: bool) -> AccountLimits:
        if temporary:
            t = self.temporary
            return AccountLimits(
                max_workers=t.max_workers,
                max_versions=t.max_versions,
                max_script_bytes=min(t.max_script_bytes, self.max_script_bytes),
                max_kv_bytes=t.max_kv_bytes,
                max_kv_namespaces=t.max_kv_namespaces,
                ai_requests_per_minute=t.ai_requests_per_minute,
                cpu_ms_per_request=t.cpu_ms_per_request,
            )
        return AccountLimits(
            max_workers=None,
            max_versions=None,
            max_script_bytes=self.max_script_bytes,
            max_kv_bytes=None,
            max_kv_namespaces=None,
            ai_requests_per_minute=None,
            cpu_ms_per_request=self.cpu_ms_per_request,
        )


def load_platform_config(path: Path) -> PlatformConfig:
    """Read ``path`` (an ember.yaml) and parse its ``platform`` section; absent -> defaults."""
    document = load_yaml(path.read_text(encoding="utf-8", errors="replace"), str(path)) or {}
    if not isinstance(document, dict):
        raise ConfigError(str(path), None, type(document).__name__, "a mapping at the top level")
    return parse_platform_config(document.get("platform") or {}, source=str(path))


def parse_platform_config(section: Any, source: str = "ember.yaml") -> PlatformConfig:
    """Parse an already-loaded ``platform`` mapping."""
    raw = _mapping(section, source, "platform")
    _only_keys(
        raw,
        source,
        "platform",
        {
            "public_url",
            "max_script_size",
            "cpu_ms_per_request",
            "max_isolates",
            "proof_of_work",
            "temporary",
        },
    )
    pow_raw = _mapping(raw.get("proof_of_work", {}), source, "platform.proof_of_work")
    tmp_raw = _mapping(raw.get("temporary", {}), source, "platform.temporary")
    proof = _parse_proof_of_work(pow_raw, source)
    temporary = _parse_temporary(tmp_raw, source)
    public_url = raw.get("public_url")
    if public_url is not None and not (
        isinstance(public_url, str) and re.match(r"^https?://[^/\s]+/?$", public_url)
    ):
        raise ConfigError(source, "platform.public_url", public_url, "an http(s) origin")
    config = PlatformConfig(
        public_url=public_url.rstrip("/") if public_url else None,
        max_script_bytes=_size(raw, "max_script_size", PlatformConfig.max_script_bytes, source),
        cpu_ms_per_request=_optional_int(raw, "cpu_ms_per_request", source, "platform"),
        max_isolates=_optional_int(raw, "max_isolates", source, "platform"),
        proof_of_work=proof,
        temporary=temporary,
    )
    return config


def _parse_proof_of_work(raw: dict[str, Any], source: str) -> ProofOfWorkConfig:
    where = "platform.proof_of_work"
    _only_keys(raw, source, where, {"k", "g", "sample", "challenge_ttl"})
    defaults = ProofOfWorkConfig()
    k = _positive_int(raw, "k", defaults.k, source, where)
    g = _positive_int(raw, "g", defaults.g, source, where)
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
        sample=min(_positive_int(raw, "sample", defaults.sample, source, where), k),
        challenge_ttl_seconds=_duration(
            raw, "challenge_ttl", defaults.challenge_ttl_seconds, source, where
        ),
    )


def _parse_temporary(raw: dict[str, Any], source: str) -> TemporaryAccountConfig:
    where = "platform.temporary"
    d = TemporaryAccountConfig()
    names = {f.name for f in dataclasses.fields(TemporaryAccountConfig)}
    renamed = {"ttl_seconds": "ttl", "max_script_bytes": "max_script_size"}
    allowed = {renamed.get(n, n) for n in names}
    _only_keys(raw, source, where, allowed)
    return TemporaryAccountConfig(
        ttl_seconds=_duration(raw, "ttl", d.ttl_seconds, source, where),
        creations_per_client_per_hour=_positive_int(
            raw, "creations_per_client_per_hour", d.creations_per_client_per_hour, source, where
        ),
        max_workers=_positive_int(raw, "max_workers", d.max_workers, source, where),
        max_versions=_positive_int(raw, "max_versions", d.max_versions, source, where),
        max_script_bytes=_size(raw, "max_script_size", d.max_script_bytes, source, where),
        max_kv_bytes=_size(raw, "max_kv_bytes", d.max_kv_bytes, source, where),
        max_kv_namespaces=_positive_int(
            raw, "max_kv_namespaces", d.max_kv_namespaces, source, where
        ),
        ai_requests_per_minute=_positive_int(
            raw, "ai_requests_per_minute", d.ai_requests_per_minute, source, where
        ),
        cpu_ms_per_request=_positive_int(
            raw, "cpu_ms_per_request", d.cpu_ms_per_request, source, where
        ),
    )


def _mapping(value: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(source, where, value, "a mapping")
    return value


def _only_keys(raw: dict[str, Any], source: str, where: str, allowed: set[str]) -> None:
    for key in raw:
        if key not in allowed:
            raise ConfigError(source, f"{where}.{key}", key, f"one of {', '.join(sorted(allowed))}")


def _positive_int(raw: dict[str, Any], key: str, default: int, source: str, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(source, f"{where}.{key}", value, "a positive integer")
    return value


def _optional_int(raw: dict[str, Any], key: str, source: str, where: str) -> int | None:
    if raw.get(key) is None:
        return None
    return _positive_int(raw, key, 1, source, where)


def _size(raw: dict[str, Any], key: str, default: int, source: str, where: str = "platform") -> int:
    value = raw.get(key, default)
    parsed = parse_size(value)
    if parsed is None:
        raise ConfigError(source, f"{where}.{key}", value, "a size such as 5MiB or 1048576")
    return parsed


def _duration(raw: dict[str, Any], key: str, default: int, source: str, where: str) -> int:
    value = raw.get(key, default)
    parsed = parse_duration(value)
    if parsed is None:
        raise ConfigError(source, f"{where}.{key}", value, "a duration such as 60m, 1h or 3600")
    return parsed


def parse_size(value: Any) -> int | None:
    """``5MiB`` / ``10MB`` / ``1024`` -> bytes; None when malformed or not positive."""
    return _with_unit(value, _SIZE_UNITS)


def parse_duration(value: Any) -> int | None:
    """``90s`` / ``60m`` / ``1h`` / ``3600`` -> seconds; None when malformed or not positive."""
    return _with_unit(value, _DURATION_UNITS)


def _with_unit(value: Any, units: dict[str, int]) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
    if not match or match.group(2).lower() not in units:
        return None
    result = int(match.group(1)) * units[match.group(2).lower()]
    return result if result > 0 else None


def default_state_dir() -> Path:
    """Where a platform keeps its state: ``$EMBER_STATE_DIR``, else
    ``$XDG_DATA_HOME/ember/platform`` (``~/.local/share`` when unset)."""
    explicit = os.environ.get("EMBER_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ember" / "platform"
