"""The sandbox's leaves of ember's exception tree."""

from __future__ import annotations

from ember.errors import InternalError, UserError


class SandboxError(InternalError):
    """A sandbox layer could not be applied, or a worker failed before it was fully sandboxed.

    ``stage`` names the step (``"unshare"``, ``"rootfs"``, ``"landlock"``...), so the runtime can
    log and branch on it without parsing the message.
    """

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(f"sandbox {stage}: {message}")


class MinimumLayersMissing(SandboxError):
    """A profile's minimum set of layers is not available on this host (fail closed).

    ``missing`` names each missing layer; the message says how to get it.
    """

    def __init__(self, profile: str, missing: tuple[str, ...], explanation: str) -> None:
        self.profile = profile
        self.missing = missing
        super().__init__("minimum", f"profile {profile!r} refused: {explanation}")


class TenantWallMissing(UserError):
    """``ember serve`` would run tenants' code where it can read each other's data.

    ``missing`` names each layer that could have walled the state directory, with why it does
    not; the message says how to get one, and names the operator's opt-out.
    """

    def __init__(self, missing: tuple[str, ...], explanation: str) -> None:
        self.missing = missing
        super().__init__(explanation)
