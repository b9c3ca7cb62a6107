"""What a project says about its Python: the packages it declares and the Python it requires.

Python Workers projects declare packages in ``pyproject.toml``'s ``[project] dependencies``
(pywrangler bundles them at deploy), older ones in ``requirements.txt``; ``requires-python``
says which interpreters the code is written for. ember installs none of it, but reads it to say
what is missing when an import fails (``ember.runtime.isolate.missing_module``) and to warn
when the interpreter that runs workers is not one the project asks for (``requires_python``).

Both files are read from the project directory, next to its config: ``ember dev`` runs a staged
copy of the modules, where neither file is. A file that cannot be read or parsed gives nothing
(these only sharpen messages; pywrangler reports a broken file itself).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

PYPROJECT = "pyproject.toml"
REQUIREMENTS = "requirements.txt"
# PEP 508: the distribution name is everything before the first version, extra or marker.
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One declared package: its distribution name, the line as written, and where."""

    name: str
    text: str
    file: str  # PYPROJECT or REQUIREMENTS

    def to_wire(self) -> dict[str, str]:
        """As the isolate's Init frame carries it."""
        return {"name": self.name, "text": self.text, "file": self.file}

    @classmethod
    def from_wire(cls, data: dict[str, str]) -> Requirement:
        """The inverse of ``to_wire``."""
        return cls(data["name"], data["text"], data["file"])


@dataclass(frozen=True, slots=True)
class PythonProject:
    """The project's declared packages (pyproject's first) and its ``requires-python``."""

    requirements: tuple[Requirement, ...] = ()
    requires_python: str | None = None


def normalised(name: str) -> str:
    """PEP 503's normal form, with ``_`` as the separator a module name would use."""
    return re.sub(r"[-_.]+", "_", name).lower()


def read_python_project(root: Path) -> PythonProject:
    """``root``'s pyproject.toml and requirements.txt, as far as they can be read."""
    requirements: list[Requirement] = []
    requires_python = None
    project = _pyproject(root / PYPROJECT)
    declared = project.get("dependencies", [])
    if isinstance(declared, list):
        requirements += _requirements([d for d in declared if isinstance(d, str)], PYPROJECT)
    if isinstance(project.get("requires-python"), str):
        requires_python = project["requires-python"].strip() or None
    try:
        lines = (root / REQUIREMENTS).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    requirements += _requirements(_requirement_lines(lines), REQUIREMENTS)
    return PythonProject(tuple(requirements), requires_python)


def _pyproject(path: Path) -> dict[str, object]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    project = data.get("project")
    return project if isinstance(project, dict) else {}


def _requirement_lines(lines: list[str]) -> list[str]:
    """pip's requirements format, as far as names go: comments, continuations and options
    (``-r``, ``-e``, ``--index-url``) are not requirements."""
    joined: list[str] = []
    pending = ""
    for raw in lines:
        line = pending + raw
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line and not line.startswith("-"):
            joined.append(line)
    return joined


def _requirements(texts: list[str], file: str) -> list[Requirement]:
    found = []
    for text in texts:
        match = _NAME.match(text)
        if match:
            found.append(Requirement(match.group(1), text.strip(), file))
    return found
