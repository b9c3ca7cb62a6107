"""The sandbox self-test (isolation.md §7): what every worker looks like from inside."""

from __future__ import annotations

import pytest

from ember.runtime.sandbox import ANONYMOUS, FULL, Layer, LayerReport
from tests.sandbox import attacks
from tests.sandbox.cases import for_profile, sandbox_spec
from tests.sandbox.conftest import Tenants
from tests.sandbox.harness import run_sandboxed

FULL_LAYERS = {"mount_ns", "pid_ns", "net_ns", "seccomp", "landlock"}


def _need(report: LayerReport, *layers: Layer) -> None:
    missing = [layer.value for layer in layers if layer not in report.available()]
    if missing:
        pytest.skip(f"this host lacks {', '.join(missing)}")


def _check_inside(result: dict, *, uid: int) -> None:
    assert result["pid"] == 1
    assert result["ppid"] == 0  # the monitor is outside the pid namespace
    assert len(result["threads"]) == 4
    for status in result["threads"].values():
        assert status == {"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0000000000000000"}
    assert result["interfaces"] == ["lo"]
    assert result["lo_up"] is False
    assert result["proc"] == ["1"]
    assert result["root_write"] in ("EROFS", "EACCES")
    assert result["hostname"] == "ember"
    assert result["env"] == {"EMBER_VAR": "visible"}
    assert result["uid"] == uid
    assert result["cwd"] == "/"
    mounts = result["mounts"]
    assert mounts[0] == "/" and {"/tmp", "/app", "/proc", "/dev/null"} <= set(mounts)
    assert not [m for m in mounts if m.startswith(("/oldroot", "/newroot"))]  # all detached


def test_self_test_as_root_with_pool_uid(
    report: LayerReport, tenants: Tenants, pool_uid: int
) -> None:
    _need(report, Layer.MOUNT_NS, Layer.PID_NS, Layer.NET_NS, Layer.UID, Layer.SECCOMP)
    spec = for_profile(
        FULL,
        report,
        deployment_id="a",
        code_dir=tenants.code_a,
        uid=pool_uid,
        env={"EMBER_VAR": "visible"},
    )
    run = run_sandboxed(spec, attacks.self_test)
    assert run.error is None, run.error
    _check_inside(run.result, uid=pool_uid)
    # "/" holds the mount points and the mirrored runtime paths, nothing of the host's own.
    assert set(run.result["root"]) <= {
        "app",
        "dev",
        "etc",
        "lib",
        "lib64",
        "lib32",
        "libx32",
        "proc",
        "tmp",
        "usr",
        *_runtime_tops(),
    }
    assert {"home", "var", "boot", "srv", "opt", "mnt"}.isdisjoint(run.result["root"])
    assert run.startup.applied.root_entries == tuple(run.result["root"])
    assert run.leftovers == []
    assert run.exit_status == 0


def test_self_test_unprivileged(
    report: LayerReport, tenants: Tenants, unpriv_uid: int | None
) -> None:
    _need(report, Layer.SECCOMP, Layer.LANDLOCK)
    # Probed as root; the unprivileged run must find user namespaces on its own.
    spec = sandbox_spec(
        deployment_id="a",
        code_dir=tenants.code_a,
        env={"EMBER_VAR": "visible"},
        layers=frozenset(Layer) - {Layer.UID, Layer.CGROUP},
        profile_name="anonymous",
        require_minimum=True,
    )
    run = run_sandboxed(spec, attacks.self_test, as_uid=unpriv_uid)
    if run.error is not None and run.error.stage in ("namespaces", "mount_ns"):
        pytest.skip(f"unprivileged user namespaces unavailable here: {run.error}")
    assert run.error is None, run.error
    _check_inside(run.result, uid=0)  # root of its own user namespace, without capabilities
    assert run.leftovers == []


def test_two_workers_draw_different_random_numbers(report: LayerReport, tenants: Tenants) -> None:
    _need(report, Layer.PID_NS, Layer.MOUNT_NS)
    spec = for_profile(
        ANONYMOUS, report, deployment_id="a", code_dir=tenants.code_a, env={"EMBER_VAR": "visible"}
    )
    first = run_sandboxed(spec, attacks.self_test)
    second = run_sandboxed(spec, attacks.self_test)
    assert first.result["random"] != second.result["random"]


def _runtime_tops() -> set[str]:
    from ember.runtime.sandbox import rootfs

    return {p.split("/")[1] for p in rootfs.runtime_paths()}
