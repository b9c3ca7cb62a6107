"""What each kind of account gets on ``ember serve``, and the refusal to run tenants unwalled.

A permanent account's worker runs under FULL: every layer the host offers, with no minimum. That
is only multi-tenant if one of those layers keeps the worker out of the state directory (every
account's secrets, KV and code; see ``sandbox/walls.py``). Without one, ``ember serve`` refuses
to start, naming what is missing and the fix, unless the operator says every worker on this box
is trusted (``--trusted-workers``): then it says so loudly at start and in ``/health``.

    tenancy = assess(supervisor.sandbox_status(), state_dir, trusted=False)
    tenancy.require()            # raises TenantWallMissing
    for line in tenancy.lines(): print(line)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ember.runtime.isolation import SandboxStatus
from ember.runtime.sandbox import Layer, resolve_layers, rootfs
from ember.runtime.sandbox.errors import TenantWallMissing
from ember.runtime.sandbox.walls import WallCheck, check_walls

TRUSTED_FLAG = "--trusted-workers"


@dataclasses.dataclass(frozen=True)
class Tenancy:
    """The startup verdict for each kind of account."""

    permanent_layers: frozenset[Layer]
    walls: WallCheck
    temporary: str  # "accepted", "refused" or "allowed below the minimum", with why
    trusted_workers: bool

    @property
    def unwalled(self) -> bool:
        """Workers run where they can read the state directory (the operator's opt-out)."""
        return self.trusted_workers and not self.walls.met

    @property
    def admits(self) -> bool:
        """Whether ``ember serve`` may run workers: walled, or trusted by the operator."""
        return self.walls.met or self.trusted_workers

    def require(self) -> None:
        """Fail closed: refuse to serve any account when no layer walls the state directory."""
        if self.admits:
            return
        raise TenantWallMissing(
            self.walls.missing,
            f"ember serve refused to start: {self.walls.explanation()}. If every worker on "
            f"this machine is yours (a single-tenant box), pass {TRUSTED_FLAG} to run them "
            "without that wall",
        )

    def lines(self) -> list[str]:
        """What each account kind gets, for the startup banner."""
        layers = ", ".join(sorted(layer.value for layer in self.permanent_layers)) or "none"
        if self.walls.met:
            permanent = f"permanent accounts: profile 'full' ({layers}); {_verdict(self)}"
        else:
            permanent = (
                f"permanent accounts: profile 'full' ({layers}); TRUSTED WORKERS "
                f"({TRUSTED_FLAG}): every worker can read the state directory, all accounts' "
                f"secrets, KV and code ({'; '.join(self.walls.missing)})"
            )
        return [permanent, f"temporary accounts: profile 'anonymous', {self.temporary}"]

    def to_dict(self) -> dict[str, Any]:
        """For ``/health``: whether tenants are walled off from each other's data."""
        return {
            "trusted_workers": self.unwalled,
            "state_dir_walled_by": list(self.walls.walls),
        }


def _verdict(tenancy: Tenancy) -> str:
    return f"workers are {tenancy.walls.explanation()}"


def assess(status: SandboxStatus, state_dir: Path, *, trusted: bool) -> Tenancy:
    """The verdict from the probed sandbox status (``status.report`` must be set)."""
    report = status.report
    assert report is not None, "ember serve probes the sandbox before it assesses it"
    policy = status.policy
    uid = 1 if status.pool_uids else None  # any uid: only whether the layer would be on matters
    layers = resolve_layers(policy.default_profile, report, disabled=policy.disabled, uid=uid)
    walls = check_walls(layers, report, state_dir, rootfs.shared_read_paths())
    minimum = report.minimum()
    if minimum.met:
        temporary = f"accepted ({minimum.explanation})"
    elif policy.allow_below_minimum:
        temporary = f"ALLOWED BELOW MINIMUM by the operator ({minimum.explanation})"
    else:
        temporary = f"refused ({minimum.explanation})"
    return Tenancy(layers, walls, temporary, trusted)
