"""What to tell the author of a worker whose import found no such package.

Python Workers projects list their packages in ``pyproject.toml`` and pywrangler bundles them
at deploy. ember installs nothing: a worker imports what ember's own Python environment has,
plus the project's vendored ``python_modules/`` (uploaded with the worker). The hint names the
``pyproject.toml`` dependency that provides the module when there is one, and both ways out.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

# PEP 508: the distribution name is everything before the first version, extra or marker.
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normalised(name: str) -> str:
    """PEP 503's normal form, with ``_`` as the separator a module name would use."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _dependencies(code_dir: Path) -> list[str]:
    try:
        data = tomllib.loads((code_dir / "pyproject.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    found = data.get("project", {}).get("dependencies", [])
    return [d for d in found if isinstance(d, str)] if isinstance(found, list) else []


def missing_module_hint(exc: ModuleNotFoundError, code_dir: Path) -> str:
    """The lines to add under the traceback, or ``""`` when the module is the project's own
    (a typo there is the user's to see in the traceback) or unnamed."""
    if not exc.name:
        return ""
    top = exc.name.split(".")[0]
    if (code_dir / top).is_dir() or (code_dir / f"{top}.py").is_file():
        return ""
    listed = next(
        (
            dep
            for dep in _dependencies(code_dir)
            if (match := _NAME.match(dep)) and _normalised(match.group(1)) == _normalised(top)
        ),
        None,
    )
    if listed:
        where = f"pyproject.toml lists {listed}, but ember installs no project's dependencies"
        install = f"pip install {shlex.quote(listed)}"
    else:
        where = f"'{top}' is not installed where ember runs workers"
        install = f"pip install {shlex.quote(top)}, or the package that provides it"
    return (
        f"{where}: a worker imports the packages of ember's own Python environment and the "
        f"project's python_modules/ folder. Install it into ember's environment for ember dev "
        f"({install}, with ember's pip), or vendor it into python_modules/ so a deploy "
        f"uploads it."
    )
