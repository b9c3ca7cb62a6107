"""What the worker's private root mirrors: host paths reached through symlinked directories."""

from __future__ import annotations

import pytest

from ember.runtime.sandbox import Layer, LayerReport
from tests.sandbox import attacks
from tests.sandbox.cases import BASE, NAMESPACES, sandbox_spec
from tests.sandbox.conftest import Tenants
from tests.sandbox.harness import run_sandboxed


def _need(report: LayerReport, *layers: Layer) -> None:
    missing = [layer.value for layer in layers if layer not in report.available()]
    if missing:
        pytest.skip(f"this host lacks {', '.join(missing)}")


def test_paths_reached_through_a_symlinked_directory_are_mirrored(
    report: LayerReport, tenants: Tenants
) -> None:
    """A runtime installed behind a symlink (a venv at ``project/.venv -> /elsewhere/.venv``)
    lists both the link and paths beneath it (its prefix and its site-packages): the worker
    must reach each at its nominal path."""
    _need(report, Layer.MOUNT_NS)
    real = tenants.base / "elsewhere" / "venv"
    (real / "lib" / "site-packages").mkdir(parents=True)
    (real / "lib" / "site-packages" / "mod.py").write_text("x = 1\n")
    link = tenants.base / "project" / ".venv"
    link.parent.mkdir()
    link.symlink_to(real)
    nested = link / "lib" / "site-packages"
    spec = sandbox_spec(
        deployment_id="a",
        code_dir=tenants.code_a,
        extra_ro_paths=(link, nested),
        layers=BASE | NAMESPACES,
    )
    run = run_sandboxed(spec, attacks.read_paths, [str(nested / "mod.py"), str(link)])
    assert run.error is None, run.error
    assert run.result == {str(nested / "mod.py"): "ok", str(link): "ok"}, run.result
