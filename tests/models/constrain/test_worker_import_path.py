"""The processes ember starts with ``python -m ember...`` (the compile worker; a model replica:
tests/models/pool/test_launch.py pins its ``-P``)
import ember's own package, not a folder named ``ember`` in their working directory: in
``ember dev`` that is the user's project, whose code runs only in the sandbox. ``python -m``
put the working directory first on the import path (review39's probes, run from a folder
holding a copy of ember, imported the copy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.models.constrain.compile_client import CompileWorker


def _impostor(folder: Path, marker: Path) -> None:
    """A project folder named ``ember`` whose compile worker would leave ``marker``."""
    package = folder / "ember" / "models" / "constrain"
    package.mkdir(parents=True)
    for part in (folder / "ember", folder / "ember" / "models", package):
        (part / "__init__.py").write_text("")
    (package / "compile_worker.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    (folder / "ember" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('main')\n")


def test_the_compile_worker_imports_embers_package_not_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran-project-code"
    _impostor(tmp_path / "project", marker)
    monkeypatch.chdir(tmp_path / "project")
    worker = CompileWorker()
    try:
        automaton = worker.compile("^a+$", "/pattern", search=False, length=(0, None))
    finally:
        worker.stop()
    assert automaton.accepts(automaton.step(automaton.start, ord("a")))
    assert not marker.exists()
