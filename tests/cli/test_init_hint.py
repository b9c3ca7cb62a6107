"""``ember init``'s last line is a command that works as printed: ``ember dev`` when the running
``ember`` is the one on PATH, else the path of the running one (the README's install puts it in
``.venv/bin``, not on PATH), relative when it was run by a relative path. Each hint is run here,
with ``dev`` swapped for ``--version``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the test venv's bin: its `ember` console script
BARE_PATH = "/usr/bin:/bin"


def _init(argv: list[str], cwd: Path, path: str, *args: str, shadow: bool = False) -> str:
    env = {"PATH": path, "PYTHONPATH": str(ROOT), "HOME": str(cwd)}
    done = subprocess.run(
        [*argv, "init", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    hint = done.stdout.splitlines()[-1]
    if shadow:  # a project folder named ``ember``, which the hint must not import
        package = cwd / args[0] / "ember"
        package.mkdir()
        (package / "__init__.py").write_text("raise ImportError('the project folder ember')\n")
    assert hint.startswith("Next: ") and hint.endswith(" dev"), hint
    # The hint, run as printed (a shell line: `cd DIR && COMMAND dev`), starts that ember.
    line = hint.removeprefix("Next: ").removesuffix(" dev") + " --version"
    ran = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True)
    assert ran.returncode == 0 and "ember" in ran.stdout, (hint, ran.stderr)
    return hint


def test_an_ember_not_on_path_is_named_by_its_path(tmp_path: Path) -> None:
    ember = BIN / "ember"
    assert ember.is_file(), "the test venv has no ember console script"
    hint = _init([str(ember)], tmp_path, BARE_PATH, "w1", "--dir", str(tmp_path))
    assert hint == f"Next: cd {tmp_path / 'w1'} && {ember} dev"


def test_a_relative_path_stays_relative_to_the_new_project(tmp_path: Path) -> None:
    (tmp_path / "venv").symlink_to(BIN.parent)  # the README's `.venv/bin/ember init my-worker`
    hint = _init(["venv/bin/ember"], tmp_path, BARE_PATH, "my-worker")
    assert hint == "Next: cd my-worker && ../venv/bin/ember dev"


def test_the_ember_on_path_is_just_ember(tmp_path: Path) -> None:
    path = f"{BIN}{os.pathsep}{BARE_PATH}"
    hint = _init(["ember"], tmp_path, path, "w2", "--dir", str(tmp_path))
    assert hint == f"Next: cd {tmp_path / 'w2'} && ember dev"


def test_python_dash_m_ember_is_named_with_its_python(tmp_path: Path) -> None:
    # -P: run from the project, a folder of it named ``ember`` is not imported in ember's stead.
    hint = _init([sys.executable, "-m", "ember"], tmp_path, BARE_PATH, "w3", shadow=True)
    assert hint == f"Next: cd w3 && {sys.executable} -P -m ember dev"
