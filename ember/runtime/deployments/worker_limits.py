"""A version's own limits (``metadata.limits``, as wrangler uploads a config's ``limits``):
checked when uploaded, then applied by the platform to every request of that version.

Cloudflare takes ``cpu_ms`` (up to 5 minutes on Workers Paid; refused outright on Free, code
100328) and ``subrequests``. Here a permanent account may set either up to the Paid maxima
(``cpu_ms`` also within the operator's ``platform.accounts.cpu_ms_per_request``); a temporary
account may only lower its own tier's values (``platform.temporary.cpu_ms_per_request``, and
Cloudflare Free's 50 subrequests per invocation: temporary accounts get Free's numbers where
ember has them, as their vars do in ``metadata_limits.py``; workers-api.md §5.1). The values
are stored with the version, so a rollback runs under the limits the old version was uploaded
with.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ember.config_values import LIMIT_KEYS
from ember.runtime.deployments.config import AccountLimits
from ember.runtime.deployments.errors import InvalidUpload, LimitAboveTier
from ember.runtime.limits import Limits

KEYS = ("cpu_ms", "subrequests")
SUBREQUESTS_TEMPORARY = 50  # per invocation, Workers Free's (Paid: 10,000, Limits' default)


def parse_limits(value: Any) -> dict[str, int]:
    """``metadata.limits`` as positive integers per known key; other keys are left to the
    platform (Cloudflare ignores what it does not know). InvalidUpload names the key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidUpload(
            f'metadata.limits must be an object such as {{"cpu_ms": 50}}, got {value!r}'
        )
    out: dict[str, int] = {}
    for key in KEYS:
        item = value.get(key)
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise InvalidUpload(f"metadata.limits.{key} must be a positive integer, got {item!r}")
        out[key] = item
    return out


def tier_maxima(account: AccountLimits, temporary: bool) -> dict[str, int]:
    """The most each limit may be set to for an account of this kind."""
    if temporary:
        cpu = account.cpu_ms_per_request or Limits().cpu_ms
        return {"cpu_ms": cpu, "subrequests": SUBREQUESTS_TEMPORARY}
    cpu = LIMIT_KEYS["cpu_ms"][1]
    if account.cpu_ms_per_request is not None:
        cpu = min(cpu, account.cpu_ms_per_request)
    return {"cpu_ms": cpu, "subrequests": LIMIT_KEYS["subrequests"][1]}


def check_tier(limits: dict[str, int], account: AccountLimits, temporary: bool) -> None:
    """LimitAboveTier for the first limit past the account's tier."""
    maxima = tier_maxima(account, temporary)
    for key, value in limits.items():
        if value <= maxima[key]:
            continue
        unit = " ms" if key == "cpu_ms" else ""
        scope = "temporary accounts" if temporary else "accounts on this platform"
        hint = " (claim the account for higher limits)" if temporary else ""
        if key == "cpu_ms" and not temporary and maxima[key] < LIMIT_KEYS["cpu_ms"][1]:
            hint = f" ({account.remedy('cpu_ms_per_request')} for more)"
        raise LimitAboveTier(
            f"limits.{key} is {value}{unit}; {scope} allow at most {maxima[key]}{unit}. "
            f"Set limits.{key} to {maxima[key]} or less, or leave it out{hint}."
        )


def version_limits(base: Limits, requested: Any, account: AccountLimits) -> Limits:
    """The limits a version runs under: the runtime's, with the version's own in their place,
    then the account's CPU cap and a temporary account's subrequests (a version stored before a
    cap or a claim changed stays within them). A stored value that is not a positive integer
    (from before uploads were checked) is passed over."""
    own = requested if isinstance(requested, dict) else {}
    values = {k: own.get(k) for k in KEYS}
    valid = {k: v for k, v in values.items() if type(v) is int and v > 0}
    cpu_ms = valid.get("cpu_ms", base.cpu_ms)
    if account.cpu_ms_per_request is not None:
        cpu_ms = min(cpu_ms, account.cpu_ms_per_request)
    subrequests = valid.get("subrequests", base.subrequests)
    if account.temporary:
        subrequests = min(subrequests, SUBREQUESTS_TEMPORARY)
    return dataclasses.replace(base, cpu_ms=cpu_ms, subrequests=subrequests)
