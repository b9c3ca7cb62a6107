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


def test_probe_explains_namespaces_blocked_by_a_container_profile() -> None:
    """Docker's default seccomp profile denies unshare: simulate it and read the reasons."""
    import json

    from ember.runtime.sandbox import seccomp

    pyseccomp, why = seccomp.load_pyseccomp()
    if pyseccomp is None:
        import pytest

        pytest.skip(why)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            container = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
            container.add_rule(pyseccomp.ERRNO(1), "unshare")
            container.load()
            os.write(write_end, json.dumps(probe().to_dict()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    layers = json.loads(data)["layers"]
    for name in ("mount_ns", "pid_ns", "net_ns", "ipc_uts_ns"):
        assert layers[name]["available"] is False
        assert "Operation not permitted" in layers[name]["reason"]
    assert "seccomp filter" in layers["pid_ns"]["reason"]
    assert layers["seccomp"]["available"] is True  # filters stack
