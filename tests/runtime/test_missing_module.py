"""A worker that imports a package ember's environment lacks: the page says what to do.

Python Workers projects list their packages in ``pyproject.toml`` (pywrangler bundles them at
deploy); ember runs workers with the packages of its own environment and the project's
``python_modules/``, and installs nothing. A bare ``ModuleNotFoundError`` left people guessing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ember.python_project import read_python_project
from ember.runtime.isolate.missing_module import missing_module_hint
from tests.cli.devprocess import DevProcess
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
    declared = read_python_project(tmp_path).requirements
    hint = missing_module_hint(ModuleNotFoundError(name=module), tmp_path, declared)
    assert expected in hint and unexpected not in hint


@pytest.mark.parametrize(
    ("declared", "module", "expected"),
    [
        ("Pillow==11.0", "PIL", "pyproject.toml lists Pillow==11.0"),
        ("PyYAML", "yaml.constructor", "pyproject.toml lists PyYAML"),
        ("opencv-contrib-python-headless", "cv2", "lists opencv-contrib-python-headless"),
        (None, "PIL", "pip install pillow, the package that provides it"),
        (None, "sklearn", "pip install scikit-learn, the package"),
        (None, "bs4", "pip install beautifulsoup4, the package"),
    ],
)
def test_an_import_name_maps_to_its_distribution(
    tmp_path: Path, declared: str | None, module: str, expected: str
) -> None:
    if declared is not None:
        (tmp_path / "pyproject.toml").write_text(f'[project]\ndependencies = ["{declared}"]\n')
    requirements = read_python_project(tmp_path).requirements
    hint = missing_module_hint(ModuleNotFoundError(name=module), tmp_path, requirements)
    assert expected in hint, hint


def test_requirements_txt_lines_that_name_packages(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        "# comment\n-r base.txt\n--index-url https://example.invalid/simple\n"
        "requests>=2  # http\nfoo[bar]==1; python_version > '3.8' \\\n  --hash=sha256:00\n\n"
        "-e ./local\nBaz_Qux\n"
    )
    found = read_python_project(tmp_path).requirements
    assert [(r.name, r.file) for r in found] == [
        ("requests", "requirements.txt"),
        ("foo", "requirements.txt"),
        ("Baz_Qux", "requirements.txt"),
    ]
    assert found[0].text == "requests>=2"


def test_no_hint_for_a_module_of_the_project_itself(tmp_path: Path) -> None:
    (tmp_path / "helpers").mkdir()
    assert missing_module_hint(ModuleNotFoundError(name="helpers.nope"), tmp_path) == ""
    assert missing_module_hint(ModuleNotFoundError(name=None), tmp_path) == ""


def test_ember_dev_names_the_declared_dependency_once(tmp_path: Path) -> None:
    """``ember dev`` runs a staged copy of the modules (no pyproject.toml there): the hint must
    still come from the project's own files, map the import name to the distribution declared
    for it, and appear once on the console (not before and after the traceback)."""
    project = tmp_path / "deps"
    (project / "src").mkdir(parents=True)
    (project / "src" / "entry.py").write_text("import bs4\n")
    (project / "wrangler.jsonc").write_text('{"name": "deps", "main": "src/entry.py"}')
    (project / "pyproject.toml").write_text(
        '[project]\nname = "deps"\nversion = "0"\ndependencies = ["beautifulsoup4>=4.12"]\n'
    )
    with DevProcess(project, state=tmp_path / "state") as dev:
        page = httpx.get(dev.url, headers={"accept": "text/plain"}, timeout=10).text
        dev.wait_for_line("No module named 'bs4'")
    console = "\n".join(dev.lines)
    for text in (page, console):
        assert "pyproject.toml lists beautifulsoup4>=4.12" in text, text
        assert "pip install 'beautifulsoup4>=4.12'" in text, text
    assert console.count("ember installs no project's dependencies") == 1, console


def test_ember_dev_reads_requirements_txt(tmp_path: Path) -> None:
    project = tmp_path / "reqs"
    project.mkdir()
    (project / "worker.py").write_text("import cv2\n")
    (project / "ember.yaml").write_text("name: reqs\nmain: worker.py\n")
    (project / "requirements.txt").write_text("# vision\nopencv-python-headless==4.10.0.84\n")
    with DevProcess(project, state=tmp_path / "state") as dev:
        page = httpx.get(dev.url, headers={"accept": "text/plain"}, timeout=10).text
    assert "requirements.txt lists opencv-python-headless==4.10.0.84" in page, page


@pytest.mark.parametrize(
    ("path", "noted"),
    [
        ("/app/python_modules/bcrypt/_bcrypt.abi3.so", True),
        ("/app/python_modules/x.cpython-311-x86_64-linux-gnu.so", True),
        ("/usr/lib/python3/dist-packages/bcrypt/_bcrypt.abi3.so", False),  # ember's own env
        ("/app/python_modules/bcrypt/__init__.py", False),
        ("/application/x.so", False),
    ],
)
def test_only_an_uploaded_compiled_extension_gets_the_native_code_note(
    path: str, noted: bool
) -> None:
    from ember.runtime.isolate.missing_module import compiled_extension_hint

    failure = ImportError(f"{path}: failed to map segment from shared object")
    note = compiled_extension_hint(failure, Path("/app"))
    assert bool(note) is noted
    if noted:
        assert note.startswith(path.removeprefix("/app/") + " is a compiled extension module")
