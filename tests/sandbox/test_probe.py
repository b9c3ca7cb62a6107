"""probe(): every layer reported with a reason, forced-off layers honoured, nothing left over."""

from __future__ import annotations

import os

from ember.runtime.sandbox import Layer, LayerReport, probe
from ember.runtime.sandbox import cgroup as cgroups


def _children() -> list[int]:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as handle:
        return [int(pid) for pid in handle.read().split()]


def test_probe_reports_every_layer_with_a_reason(report: LayerReport) -> None:
    assert [status.layer for status in report.statuses] == list(Layer)
    assert all(status.reason for status in report.statuses)
    assert report.status(Layer.HYGIENE).available and report.status(Layer.RLIMITS).available
    assert report.status(Layer.UID).available == (os.geteuid() == 0)
    if report.landlock_abi:
        assert f"ABI {report.landlock_abi}" in report.status(Layer.LANDLOCK).reason
    data = report.to_dict()
    assert set(data["layers"]) == {layer.value for layer in Layer}
    assert data["anonymous_minimum"]["met"] == report.minimum().met


def test_forced_off_layers_are_reported_and_count_against_the_minimum() -> None:
    before = _children()
    forced = probe(disabled=frozenset({Layer.PID_NS, Layer.LANDLOCK, Layer.HYGIENE}))
    assert _children() == before  # every probe child reaped
    assert forced.status(Layer.PID_NS).reason.startswith("forced off by configuration")
    assert not forced.status(Layer.LANDLOCK).available
    assert forced.status(Layer.HYGIENE).available  # cannot be forced off
    assert not forced.minimum().met
    assert "pid_ns" in forced.minimum().missing


def test_probe_leaves_no_cgroup_behind(report: LayerReport) -> None:
    if not report.status(Layer.CGROUP).available:
        return
    for parent in cgroups.parents().values():
        assert not [e for e in os.listdir(parent) if e.startswith("ember-probe-")]
