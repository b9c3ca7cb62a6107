"""Which sandbox each deployment runs under, and whether anonymous deployments are taken.

``ember serve`` probes the sandbox layers once at start (``ember doctor`` shows the same). Workers
of permanent accounts run under the ``full`` profile (every layer this host offers); workers of
temporary accounts, whose code nobody vouches for, under ``anonymous``, which refuses to run
below the minimum set (pid + net + mount namespaces with seccomp or Landlock, or seccomp and
Landlock together). When that minimum is missing, the platform refuses to create temporary
accounts at all (``POST /provisioning/previews*`` answers 403 with the reason), unless the
operator explicitly allows it (``--allow-unsandboxed-anonymous``); then anonymous workers run with
what there is, and ``ember serve`` says so at start.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.runtime.sandbox import ANONYMOUS, FULL, LayerReport, Profile, resolve_layers
from ember.runtime.sandbox.errors import MinimumLayersMissing


@dataclass(frozen=True)
class SandboxPlan:
    """The probe's findings and the operator's choice about anonymous code."""

    report: LayerReport
    allow_anonymous_below_minimum: bool = False

    def profile_for(self, temporary: bool) -> Profile:
        return ANONYMOUS if temporary else FULL

    def anonymous_refusal(self) -> str | None:
        """Why temporary accounts are refused here (None: they are accepted)."""
        minimum = self.report.minimum()
        if minimum.met or self.allow_anonymous_below_minimum:
            return None
        return (
            f"the worker sandbox on this machine lacks the minimum for anonymous code "
            f"({minimum.explanation}); see `ember doctor`"
        )

    def layers_for(self, profile: Profile) -> frozenset[str] | None:
        """The layer names ``profile`` gets here (None: the profile refuses to run)."""
        try:
            layers = resolve_layers(profile, self.report, uid=0 if self.report.euid == 0 else None)
        except MinimumLayersMissing:
            return None
        return frozenset(layer.value for layer in layers)

    def describe(self) -> list[str]:
        """Lines for ``ember serve``'s banner."""
        report = self.report
        who = "root" if report.euid == 0 else "unprivileged"
        lines = [f"Worker sandbox (Linux {report.kernel}, {who}):"]
        for status in report.statuses:
            mark = "ok" if status.available else "--"
            lines.append(f"  [{mark}] {status.layer.value:<11} {status.reason}")
        for profile, who in ((FULL, "permanent accounts"), (ANONYMOUS, "temporary accounts")):
            layers = self.layers_for(profile)
            if layers is None:
                state = "REFUSED below the minimum"
                if self.allow_anonymous_below_minimum:
                    state += " (allowed anyway by the operator: --allow-unsandboxed-anonymous)"
            else:
                state = ", ".join(sorted(layers))
            lines.append(f"  {who} ({profile.name}): {state}")
        refusal = self.anonymous_refusal()
        verdict = "accepted" if refusal is None else f"REFUSED: {refusal}"
        lines.append(f"  anonymous deployments (--temporary): {verdict}")
        return lines
