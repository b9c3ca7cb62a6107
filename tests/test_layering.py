"""Imports point one way (cli -> runtime -> bindings -> models -> core); torch stays in models."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ember"
# A layer may import itself and anything to its right.
ORDER = ["cli", "runtime", "bindings", "models"]
HEAVY = {"torch", "transformers", "sglang", "safetensors", "tokenizers"}


def _imports(path: pathlib.Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
    return found


def _layer(path: pathlib.Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 and parts[0] in ORDER else None


def _sources() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_imports_point_one_way() -> None:
    violations = []
    for path in _sources():
        layer = _layer(path)
        if layer is None:
            continue
        allowed = set(ORDER[ORDER.index(layer) :])
        for module, line in _imports(path):
            parts = module.split(".")
            if parts[0] == "ember" and len(parts) > 1 and parts[1] in ORDER:
                if parts[1] not in allowed:
                    violations.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert violations == []


def test_heavy_packages_are_imported_only_under_models() -> None:
    violations = []
    for path in _sources():
        if _layer(path) == "models":
            continue
        for module, line in _imports(path):
            if module.split(".")[0] in HEAVY:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert violations == []


def test_cli_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from ember.cli.main import cli\n"
        "try:\n    cli.main(args=['--help'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported by ember --help'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)


def test_cli_command_modules_do_not_import_torch() -> None:
    # The suite and users run `ember deploy`, `secret`, `kv`... as fresh processes: a command
    # module that pulls torch in at import costs every run seconds of CPU for nothing.
    code = (
        "import importlib, sys\n"
        "from ember.cli.main import COMMANDS\n"
        "for target in COMMANDS.values():\n"
        "    importlib.import_module(target.split(':')[0])\n"
        "    assert 'torch' not in sys.modules, f'torch imported by {target}'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_no_top_level_workers_package_is_installed() -> None:
    """`workers`, `js` and `pyodide` exist only inside isolates, never in site-packages."""
    code = (
        "import importlib.util, sys\n"
        "bad = [m for m in ('workers', 'js', 'pyodide') if importlib.util.find_spec(m)]\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT / "tests")
    assert result.returncode == 0


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_small(path: pathlib.Path) -> None:
    """One noun per module (style R1): past 500 lines a module must be split."""
    assert len(path.read_text().splitlines()) <= 500
