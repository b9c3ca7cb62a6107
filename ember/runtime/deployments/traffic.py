"""A deployment's traffic split: the ``versions`` of ``POST .../deployments``, read and checked.

Cloudflare's rules, as wrangler's ``versions deploy`` enforces them before it sends the request
(workers-sdk ``src/versions/deploy.ts``): one or two versions, each percentage from 0 to 100,
together 100 (within wrangler's epsilon of 0.001). 0% is allowed: such a version receives no
traffic by chance, only requests that pin it with the version-overrides header (Cloudflare's
"smoke test" of a new version). Every refusal names the field it is about, as ``versions[1]``.
"""

from __future__ import annotations

from typing import Any

from ember.runtime.deployments.errors import InvalidRequest
from ember.runtime.deployments.records import DeploymentTarget

MAX_VERSIONS = 2
EPSILON = 0.001  # wrangler's: a subtotal within this of 100 counts as 100


def parse_targets(raw: Any) -> list[DeploymentTarget]:
    """The body's ``versions`` as targets, or ``InvalidRequest`` naming the bad field."""
    if not isinstance(raw, list) or not raw:
        raise InvalidRequest(
            'versions must be a non-empty list of {"version_id": "...", "percentage": N}'
        )
    targets = []
    for index, item in enumerate(raw):
        field = f"versions[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f'{field} must be an object {{"version_id", "percentage"}}')
        version_id, percentage = item.get("version_id"), item.get("percentage")
        if not isinstance(version_id, str) or not version_id:
            raise InvalidRequest(f"{field}.version_id must be a version id (a string)")
        # bool is an int in Python; JSON's true is not a percentage.
        if isinstance(percentage, bool) or not isinstance(percentage, int | float):
            raise InvalidRequest(f"{field}.percentage must be a number from 0 to 100")
        targets.append(DeploymentTarget(version_id, float(percentage)))
    check_targets(targets)
    return targets


def check_targets(targets: list[DeploymentTarget]) -> None:
    """Cloudflare's rules for a split (see the module docstring)."""
    if not 1 <= len(targets) <= MAX_VERSIONS:
        raise InvalidRequest(
            f"versions names {len(targets)} versions; a deployment has one or {MAX_VERSIONS}"
        )
    seen: dict[str, int] = {}
    for index, target in enumerate(targets):
        if target.version_id in seen:
            raise InvalidRequest(
                f"versions[{index}].version_id repeats versions[{seen[target.version_id]}] "
                f"({target.version_id}); name each version once"
            )
        seen[target.version_id] = index
        if not 0 <= target.percentage <= 100:
            raise InvalidRequest(
                f"versions[{index}].percentage is {target.percentage:g}; it must be from 0 to 100"
            )
    total = sum(t.percentage for t in targets)
    if abs(total - 100.0) > EPSILON:
        raise InvalidRequest(
            f"versions[].percentage add up to {total:g}; they must total exactly 100"
        )
