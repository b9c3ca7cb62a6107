"""A worker that imports a package ember's environment lacks: the page says what to do.

Python Workers projects list their packages in ``pyproject.toml`` (pywrangler bundles them at
deploy); ember runs workers with the packages of its own environment and the project's
``python_modules/``, and installs nothing. A bare ``ModuleNotFoundError`` left people guessing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.runtime.isolate.missing_module import missing_module_hint
from tests.runtime.harness import Harness, write_project

PYPROJECT = """\
[project]
name = "dep-worker"
version = "0.1.0"
dependencies = ["No-Such.Dep_xyz>=1.0", "httpx"]
"""


def test_the_load_error_names_the_pyproject_dependency_and_both_ways_out(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "dep", "import no_such_dep_xyz\n", main="src/entry.py")
    (root / "pyproject.toml").write_text(PYPROJECT)
    deployment_id = harness.deploy(root)
    with harness.client(deployment_id) as client:
        page = client.get("/", headers={"accept": "text/plain"}).text
    assert "ModuleNotFoundError: No module named 'no_such_dep_xyz'" in page
    assert "pyproject.toml lists No-Such.Dep_xyz>=1.0" in page
    assert "pip install 'No-Such.Dep_xyz>=1.0'" in page and "python_modules/" in page


@pytest.mark.parametrize(
    ("pyproject", "module", "expected", "unexpected"),
    [
        (None, "yaml_thing", "pip install yaml_thing", "pyproject.toml lists"),
        (PYPROJECT, "other_mod", "pip install other_mod", "pyproject.toml lists"),
        ('[project]\ndependencies = ["tomli-w"]\n', "tomli_w.sub", "lists tomli-w", "other"),
        ("not [ toml", "x", "pip install x", "pyproject.toml lists"),
    ],
)
def test_the_hint_matches_a_dependency_by_its_normalised_name(
    tmp_path: Path, pyproject: str | None, module: str, expected: str, unexpected: str
) -> None:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    hint = missing_module_hint(ModuleNotFoundError(name=module), tmp_path)
    assert expected in hint and unexpected not in hint


def test_no_hint_for_a_module_of_the_project_itself(tmp_path: Path) -> None:
    (tmp_path / "helpers").mkdir()
    assert missing_module_hint(ModuleNotFoundError(name="helpers.nope"), tmp_path) == ""
    assert missing_module_hint(ModuleNotFoundError(name=None), tmp_path) == ""
