"""HTTP client libraries inside an isolate become subrequests, as on Cloudflare's Python Workers.

| library | here |
|---|---|
| ``requests``, ``urllib3`` (2.x) | blocking subrequests (``urllib3_adapter``) |
| ``httpx.Client`` / ``httpx.AsyncClient`` | blocking / awaited subrequests (``httpx_adapter``) |
| ``aiohttp`` (when installed) | awaited subrequests behind its own parser (``aiohttp_adapter``) |
| ``urllib.request``, ``http.client`` | unsupported (as on the platform): a clear error |

Each adapter is applied when its module is first imported (a ``sys.meta_path`` finder wraps
the module's loader), or at once if it was imported before the worker: an isolate that never
imports ``httpx`` never pays for it. Nothing here runs outside an isolate: the supervisor's own
httpx client is untouched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# module whose classes are patched -> the adapter that patches them (its ``patch(module)``)
ADAPTERS = {
    "urllib3.connectionpool": "ember.runtime.isolate.httpclients.urllib3_adapter",
    "httpx._transports.default": "ember.runtime.isolate.httpclients.httpx_adapter",
    "aiohttp.connector": "ember.runtime.isolate.httpclients.aiohttp_adapter",
    "http.client": "ember.runtime.isolate.httpclients.stdlib_guard",
}


def install() -> None:
    """Patch what is imported already; patch the rest when it is imported.

    The finder goes first on ``sys.meta_path``: finders that answer for every module (the
    project's source-only finder, ``loader.py``) would otherwise find the modules without it.
    """
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PatchOnImport)]
    sys.meta_path.insert(0, _PatchOnImport())
    for name in ADAPTERS:
        module = sys.modules.get(name)
        if module is not None:
            _apply(name, module)


def _apply(name: str, module: ModuleType) -> None:
    importlib.import_module(ADAPTERS[name]).patch(module)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the adapted modules with the other finders, then wraps their loaders."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in ADAPTERS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, fullname)
                return spec  # type: ignore[no-any-return]
        return None


class _PatchingLoader(importlib.abc.Loader):
    """The module's own loader, then its adapter."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        _apply(self._name, module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename... for tracebacks
        return getattr(self._inner, name)
