"""Tracebacks shown to a worker's author name ember's files by a neutral path and hide its
frames, and nothing else: a user's folder next to the package whose name starts with "ember"
stays as it is, and visible."""

from __future__ import annotations

from pathlib import Path

import ember
from ember.runtime.isolate.tracebacks import NEUTRAL_DIR, _hidden, neutral_paths

EMBER = str(Path(ember.__file__).resolve().parent)


def test_ember_files_get_the_neutral_path_and_are_hidden() -> None:
    shim = f"{EMBER}/runtime/isolate_path/workers/__init__.py"
    own = f"{EMBER}/bindings/env.py"
    assert neutral_paths(f'File "{shim}"') == f'File "{NEUTRAL_DIR}/workers/__init__.py"'
    assert neutral_paths(f'File "{own}"') == f'File "{NEUTRAL_DIR}/ember/bindings/env.py"'
    assert _hidden(shim) and _hidden(own)


def test_a_sibling_folder_named_like_the_package_is_the_users() -> None:
    sibling = f"{EMBER}_site/worker.py"
    assert neutral_paths(f'File "{sibling}"') == f'File "{sibling}"'
    assert not _hidden(sibling)
