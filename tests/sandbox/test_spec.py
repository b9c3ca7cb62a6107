"""Pure parts of the sandbox: profiles, the minimum set, specs, mount plans, report parsing."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ember.errors import ConfigError
from ember.runtime.sandbox import (
    ANONYMOUS,
    DEV,
    FULL,
    AppliedLayers,
    Layer,
    LayerReport,
    LayerStatus,
    MinimumLayersMissing,
    SandboxError,
    SandboxSpec,
    check_minimum,
    landlock,
    parse_layers,
    read_startup,
    resolve_layers,
    rootfs,
)
from ember.runtime.sandbox.report import write_record


def _report(available: set[Layer], euid: int = 0) -> LayerReport:
    statuses = tuple(
        LayerStatus(layer, layer in available, "ok" if layer in available else "absent here")
        for layer in Layer
    )
    return LayerReport(statuses, euid, euid != 0, 7, "test")


def _minimum_reference(layers: frozenset[Layer]) -> bool:
    """isolation.md §6.4 spelled out literally."""
    namespaces = {Layer.PID_NS, Layer.NET_NS, Layer.MOUNT_NS} <= layers
    wall = Layer.SECCOMP in layers or Layer.LANDLOCK in layers
    both_walls = Layer.SECCOMP in layers and Layer.LANDLOCK in layers
    return (namespaces and wall) or both_walls


@given(st.frozensets(st.sampled_from(list(Layer))))
def test_minimum_check_matches_the_reference(layers: frozenset[Layer]) -> None:
    check = check_minimum(layers)
    assert check.met == _minimum_reference(layers)
    assert (check.missing == ()) == check.met


def test_minimum_names_what_is_missing() -> None:
    check = check_minimum({Layer.NET_NS, Layer.SECCOMP})
    assert check.missing == ("pid_ns", "mount_ns")
    check = check_minimum({Layer.PID_NS, Layer.NET_NS, Layer.MOUNT_NS})
    assert check.missing == ("seccomp or landlock",)


def test_resolve_layers_per_profile() -> None:
    everything = set(Layer)
    report = _report(everything)
    assert resolve_layers(DEV, report) == {Layer.HYGIENE, Layer.RLIMITS}
    assert resolve_layers(FULL, report, uid=None) == everything - {Layer.UID}
    assert resolve_layers(FULL, report, uid=1000) == everything
    off = resolve_layers(FULL, report, uid=1000, disabled=frozenset({Layer.SECCOMP}))
    assert off == everything - {Layer.SECCOMP}
    # hygiene and rlimits cannot be forced off
    assert Layer.HYGIENE in resolve_layers(DEV, report, disabled=frozenset({Layer.HYGIENE}))


def test_anonymous_profile_fails_closed() -> None:
    report = _report({Layer.HYGIENE, Layer.RLIMITS, Layer.NET_NS, Layer.LANDLOCK})
    with pytest.raises(MinimumLayersMissing) as refused:
        resolve_layers(ANONYMOUS, report)
    assert refused.value.missing == ("pid_ns", "mount_ns")
    assert "profile 'anonymous' refused" in str(refused.value)
    # the same host is fine for the full profile: it applies what there is
    assert resolve_layers(FULL, report) == {
        Layer.HYGIENE,
        Layer.RLIMITS,
        Layer.NET_NS,
        Layer.LANDLOCK,
    }


def test_parse_layers() -> None:
    assert parse_layers(" landlock, seccomp ") == {Layer.LANDLOCK, Layer.SECCOMP}
    assert parse_layers("") == frozenset()
    with pytest.raises(ConfigError, match="selinux"):
        parse_layers("landlock,selinux")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("code_dir", Path("relative")),
        ("temp_size", 10),
        ("memory_limit", 0),
        ("nofile", 2),
        ("uid", -1),
        ("deployment_id", ""),
        ("env", {"A=B": "x"}),
    ],
)
def test_spec_rejects_bad_values(field: str, value: object, tmp_path: Path) -> None:
    fields = {"deployment_id": "d", "code_dir": tmp_path, field: value}
    with pytest.raises(ConfigError, match=field):
        SandboxSpec(**fields)  # type: ignore[arg-type]


def test_spec_with_uid_layer_needs_a_uid(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="uid"):
        SandboxSpec(deployment_id="d", code_dir=tmp_path, layers=frozenset({Layer.UID}))


def test_applied_layers_round_trip_through_json() -> None:
    applied = AppliedLayers(
        frozenset({Layer.PID_NS, Layer.SECCOMP}),
        "full",
        7,
        4242,
        1,
        2,
        "/app",
        "/tmp",
        ("app", "tmp"),
        ("fork",),
    )
    assert AppliedLayers.from_dict(json.loads(json.dumps(applied.to_dict()))) == applied


def test_spec_crosses_the_wire(tmp_path: Path) -> None:
    import msgpack

    spec = SandboxSpec(
        deployment_id="d",
        code_dir=tmp_path,
        uid=4000,
        env={"A": "1"},
        layers=frozenset({Layer.HYGIENE, Layer.UID}),
        extra_ro_paths=(tmp_path,),
        host_temp_dir=tmp_path,
        require_minimum=True,
        profile_name="anonymous",
    )
    wire = msgpack.unpackb(msgpack.packb(spec.to_wire()))
    assert SandboxSpec.from_wire(wire) == spec
    with pytest.raises(ConfigError, match="surprise"):
        SandboxSpec.from_wire({**wire, "surprise": 1})
    with pytest.raises(ConfigError, match="layers"):
        SandboxSpec.from_wire({**wire, "layers": ["selinux"]})


def test_mount_plan_mirrors_runtime_and_puts_code_at_app(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    plan = rootfs.build_plan(
        SandboxSpec(deployment_id="d", code_dir=code), temp_owner=(5, 6), with_proc=True
    )
    targets = [bind.target for bind in plan.binds]
    assert targets.count("/app") == 1
    assert next(b for b in plan.binds if b.target == "/app").source == os.path.realpath(code)
    # every runtime path is reachable at its own path, through exactly one outermost bind
    for path in rootfs.runtime_paths():
        real = os.path.realpath(path)
        assert sum(real == t or real.startswith(t + "/") for t in targets) == 1, path
    assert any(
        real == os.path.realpath(sys.base_prefix)
        or os.path.realpath(sys.base_prefix).startswith(real + "/")
        for real in targets
    )
    assert plan.temp_owner == (5, 6)
    for path, _ in plan.symlinks:
        assert path not in targets


def test_mount_plan_rejects_missing_or_reserved_paths(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="does not exist"):
        rootfs.build_plan(
            SandboxSpec(deployment_id="d", code_dir=tmp_path, extra_ro_paths=(tmp_path / "nope",)),
            temp_owner=(0, 0),
            with_proc=False,
        )
    with pytest.raises(SandboxError, match="reserved"):
        rootfs.build_plan(
            SandboxSpec(deployment_id="d", code_dir=tmp_path, extra_ro_paths=(Path("/dev"),)),
            temp_owner=(0, 0),
            with_proc=False,
        )


def test_landlock_rights_grow_with_the_abi() -> None:
    assert landlock.handled_fs(1) == (1 << 13) - 1
    assert landlock.handled_fs(2) & landlock.REFER
    assert not landlock.handled_fs(2) & landlock.TRUNCATE
    assert landlock.handled_fs(5) & landlock.IOCTL_DEV


def _pipe_with(*records: bytes) -> int:
    read_end, write_end = os.pipe()
    for record in records:
        os.write(write_end, record)
    os.close(write_end)
    return read_end


def _record(value: object) -> bytes:
    data = json.dumps(value).encode()
    return struct.pack(">I", len(data)) + data


def test_read_startup_reports_failures_by_stage() -> None:
    fd = _pipe_with(
        _record({"type": "pids", "worker_pid": 5, "monitor_pid": 4}),
        _record({"type": "failed", "stage": "landlock", "error": "boom"}),
    )
    with pytest.raises(SandboxError) as failed:
        read_startup(fd)
    assert failed.value.stage == "landlock"
    os.close(fd)


def test_read_startup_rejects_eof_oversize_and_garbage() -> None:
    for data, message in [
        (b"", "exited before"),
        (struct.pack(">I", 1 << 30), "exceeds"),
        (_record([1, 2]), "not a JSON object"),
    ]:
        fd = _pipe_with(data)
        with pytest.raises(SandboxError, match=message):
            read_startup(fd, timeout_s=2)
        os.close(fd)


def test_read_startup_returns_pids_and_layers() -> None:
    applied = AppliedLayers(frozenset({Layer.HYGIENE}), "dev", None, 9, 0, 0, "/c", None)
    read_end, write_end = os.pipe()
    write_record(write_end, {"type": "pids", "worker_pid": 9, "monitor_pid": None, "cgroups": []})
    write_record(write_end, {"type": "ready", "applied": applied.to_dict()})
    os.close(write_end)
    startup = read_startup(read_end)
    os.close(read_end)
    assert (startup.worker_pid, startup.monitor_pid, startup.applied) == (9, None, applied)
