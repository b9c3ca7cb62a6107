"""The pool's shared settings (``ai.pool``): start policy, timeouts, health checks, backoff.

Every key and its range is in ``POOL_KEYS``; docs/ai-pool.md's limits table says what a request that
runs into each limit gets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ember.errors import ConfigError

POOL_KEYS = {
    # key: (minimum, maximum)
    "startup_timeout_s": (1.0, 7200.0),
    "health_interval_s": (0.05, 60.0),
    "health_timeout_s": (0.05, 60.0),
    "unhealthy_after": (1, 100),
    "request_timeout_s": (1.0, 86400.0),
    "queue_timeout_s": (0.1, 86400.0),
    "drain_timeout_s": (0.0, 3600.0),
    "restart_backoff_s": (0.05, 600.0),
    "max_restart_backoff_s": (0.05, 3600.0),
    "account_share": (0.01, 1.0),
    "eject_after": (0, 1000),
    "eject_time_s": (0.05, 3600.0),
    "max_eject_time_s": (0.05, 86400.0),
}
INTEGER_KEYS = frozenset({"unhealthy_after", "eject_after"})


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """Timing and start policy shared by every model."""

    start: Literal["lazy", "eager"] = "lazy"
    # False: ids nobody configured are unknown (5007) instead of getting a replica. None: the
    # command's default, True on ``ember dev`` and False on ``ember serve`` (whose operator pays
    # for every replica a tenant could otherwise start by naming a catalog id).
    serve_unconfigured: bool | None = None
    # Whether a failure's text may show how the replica runs (python path, config file, args):
    # ``ember dev`` shows its one user everything; ``ember serve`` keeps it in the operator's log
    # and tells tenants only what happened. Not a config key: the command sets it.
    operator_detail: bool = True
    startup_timeout_s: float = 600.0
    health_interval_s: float = 1.0
    # Generous: a busy CPU box answers slowly, and three misses in a row restart the replica.
    health_timeout_s: float = 5.0
    unhealthy_after: int = 3  # consecutive failed probes before a replica counts as dead
    request_timeout_s: float = 600.0  # a request's whole life (3007 past it)
    queue_timeout_s: float = 600.0  # waiting for a slot, loading included
    drain_timeout_s: float = 30.0
    restart_backoff_s: float = 0.5
    max_restart_backoff_s: float = 30.0
    # The part of each model's running + queued bound one account may hold (fair.py). None:
    # no cap, ``ember dev``'s default (one trusted user); ``ember serve`` makes it 0.5.
    account_share: float | None = None
    # Outlier ejection (outlier.py): failed requests in a row that take a replica out of
    # rotation (0: never), for how long at first, and the cap of the doubling.
    eject_after: int = 5
    eject_time_s: float = 30.0
    max_eject_time_s: float = 300.0


def parse_pool_settings(value: object, file: str, where: str) -> PoolSettings:
    """The ``pool`` mapping as ``PoolSettings`` (ConfigError names the key)."""
    if value is None:
        return PoolSettings()
    if not isinstance(value, dict):
        raise ConfigError(file, where, value, "a mapping such as {start: lazy}")
    changes: dict[str, object] = {}
    for key, item in value.items():
        if key == "start":
            if item not in ("lazy", "eager"):
                raise ConfigError(file, f"{where}.start", item, "lazy or eager")
            changes[key] = item
            continue
        if key == "serve_unconfigured":
            if not isinstance(item, bool):
                raise ConfigError(file, f"{where}.{key}", item, "true or false")
            changes[key] = item
            continue
        if key not in POOL_KEYS:
            raise ConfigError(
                file, f"{where}.{key}", key, _one_of({"start", "serve_unconfigured", *POOL_KEYS})
            )
        low, high = POOL_KEYS[key]
        if isinstance(item, bool) or not isinstance(item, int | float) or not low <= item <= high:
            raise ConfigError(file, f"{where}.{key}", item, f"a number from {low:g} to {high:g}")
        changes[key] = int(item) if key in INTEGER_KEYS else float(item)
    return replace(PoolSettings(), **changes)  # type: ignore[arg-type]


def _one_of(keys: set[str]) -> str:
    return "one of " + ", ".join(sorted(keys))
