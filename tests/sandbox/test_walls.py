"""Which layers keep a worker out of the platform's state directory (pure; the real attack runs
in tests/serve/test_tenant_walls.py)."""

from __future__ import annotations

from pathlib import Path

from ember.runtime.sandbox import Layer, LayerReport, LayerStatus
from ember.runtime.sandbox.walls import check_walls


def _report(available: set[Layer]) -> LayerReport:
    statuses = tuple(
        LayerStatus(layer, layer in available, "ok" if layer in available else "absent here")
        for layer in Layer
    )
    return LayerReport(statuses, 0, False, 7, "test")


ALL = set(Layer)


def test_mount_namespace_or_landlock_each_wall_the_state_directory(tmp_path: Path) -> None:
    for layers in ({Layer.MOUNT_NS}, {Layer.LANDLOCK}, {Layer.MOUNT_NS, Layer.LANDLOCK}):
        check = check_walls(layers, _report(ALL), tmp_path / "state", ["/usr"])
        assert check.met and set(check.walls) == {layer.value for layer in layers}


def test_the_pool_uid_alone_is_no_wall_and_the_reason_names_each_missing_layer(
    tmp_path: Path,
) -> None:
    check = check_walls({Layer.UID, Layer.SECCOMP}, _report({Layer.UID}), tmp_path, ["/usr"])
    assert not check.met
    assert check.missing == ("mount_ns: absent here", "landlock: absent here")
    assert "uid alone cannot" in check.explanation()


def test_a_state_directory_beneath_what_workers_read_is_walled_by_nothing(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    state = venv / "var" / "ember"
    state.mkdir(parents=True)
    check = check_walls(ALL, _report(ALL), state, ["/usr", str(venv)])
    assert not check.met
    assert all(f"lies beneath {venv}" in why for why in check.missing)
    assert check_walls(ALL, _report(ALL), tmp_path / "venv2", [str(venv)]).met  # a prefix only
