"""A version's own limits against its account's tier: checked at upload, applied at run."""

from __future__ import annotations

import pytest

from ember.runtime.deployments.config import PlatformConfig
from ember.runtime.deployments.errors import InvalidUpload, LimitAboveTier
from ember.runtime.deployments.worker_limits import check_tier, parse_limits, version_limits
from ember.runtime.limits import Limits

CONFIG = PlatformConfig()
PERMANENT, TEMPORARY = CONFIG.limits_for(False), CONFIG.limits_for(True)


def test_a_versions_limits_replace_the_defaults_within_the_accounts_cap() -> None:
    base = Limits()
    assert version_limits(base, None, PERMANENT) == base
    raised = version_limits(base, {"cpu_ms": 60_000, "subrequests": 20}, PERMANENT)
    assert (raised.cpu_ms, raised.subrequests) == (60_000, 20)
    # A temporary account (or one whose cap changed) stays within its cap whatever was stored,
    # and a value stored before uploads were checked is passed over.
    assert version_limits(base, {"cpu_ms": 60_000}, TEMPORARY).cpu_ms == 50
    # Subrequests: a temporary account is on Cloudflare Free's 50 (its vars are, too), whatever
    # was stored; it may lower them.
    assert version_limits(base, None, TEMPORARY).subrequests == 50
    assert version_limits(base, {"subrequests": 10_000}, TEMPORARY).subrequests == 50
    assert version_limits(base, {"subrequests": 20}, TEMPORARY).subrequests == 20
    assert version_limits(base, {"cpu_ms": "fast", "subrequests": 0}, PERMANENT) == base


@pytest.mark.parametrize(
    ("limits", "temporary", "maximum"),
    [({"cpu_ms": 300_001}, False, "300000 ms"), ({"cpu_ms": 51}, True, "50 ms"),
     ({"subrequests": 51}, True, "50")],
)  # fmt: skip
def test_past_the_tier_is_refused_naming_key_and_maximum(
    limits: dict[str, int], temporary: bool, maximum: str
) -> None:
    with pytest.raises(LimitAboveTier) as refused:
        check_tier(limits, TEMPORARY if temporary else PERMANENT, temporary)
    assert refused.value.cf_code == 100328 and f"at most {maximum}" in str(refused.value)
    assert f"limits.{next(iter(limits))}" in str(refused.value)
    check_tier({"cpu_ms": 50, "subrequests": 50}, TEMPORARY, True)
    check_tier({"cpu_ms": 300_000, "subrequests": 10_000_000}, PERMANENT, False)


@pytest.mark.parametrize("value", [[50], {"cpu_ms": True}, {"cpu_ms": 0}, {"subrequests": 1.5}])
def test_a_malformed_limits_object_names_the_key(value: object) -> None:
    with pytest.raises(InvalidUpload, match="metadata.limits"):
        parse_limits(value)
