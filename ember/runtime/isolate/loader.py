"""Import the worker's own modules from source, never from ``__pycache__``.

``ember dev`` reloads on every save; a ``.pyc`` is trusted when its source has the same mtime
(whole seconds) and size, so an edit that keeps the size within the same second would run the
old code. Modules under the project directory are therefore always compiled from their source
(they are small; the stdlib and packages keep their caches).

``ember dev`` runs the worker from a staged copy of its modules; ``source_dir`` names where the
copies came from, and code is compiled under those names, so tracebacks point at the files the
user edits.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from pathlib import Path
from types import CodeType, ModuleType


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """A source loader that ignores and never writes bytecode caches; ``shown_as`` is the file
    name its code reports (tracebacks), when not the file it reads."""

    def __init__(self, fullname: str, path: str, shown_as: str | None = None) -> None:
        super().__init__(fullname, path)
        self.shown_as = shown_as or path

    def get_code(self, fullname: str) -> CodeType:
        source = self.get_data(self.path)
        return compile(source, self.shown_as, "exec", dont_inherit=True)


class ProjectFinder(importlib.abc.MetaPathFinder):
    """Finds modules like the path finder, loading those under ``root`` with SourceOnlyLoader."""

    def __init__(self, root: Path, source_dir: Path | None = None) -> None:
        self.root = str(root.resolve())
        self.source_dir = source_dir

    def shown_as(self, path: str) -> str:
        """The name code at ``path`` (under ``root``) is compiled under."""
        if self.source_dir is None:
            return path
        return str(self.source_dir / Path(path).relative_to(self.root))

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            return spec
        if not spec.origin.startswith(self.root + "/"):
            return spec
        is_package = spec.submodule_search_locations is not None
        new = importlib.machinery.ModuleSpec(
            fullname,
            SourceOnlyLoader(fullname, spec.origin, self.shown_as(spec.origin)),
            origin=spec.origin,
            is_package=is_package,
        )
        if is_package:
            new.submodule_search_locations = spec.submodule_search_locations
        new.has_location = True
        return new


def install(root: Path, source_dir: Path | None = None) -> ProjectFinder:
    """Load modules under ``root`` from source from now on."""
    finder = ProjectFinder(root, source_dir)
    sys.meta_path.insert(0, finder)
    return finder
