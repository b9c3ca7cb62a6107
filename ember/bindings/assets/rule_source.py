"""Where a deployment's compiled ``_redirects`` / ``_headers`` come from, compiled off the
event loop that serves every tenant (and, in ``ember dev``, the worker's binding calls).

``CompiledOnce``: a deployed version's, compiled on a thread at its first asset request (not
when ``ember serve`` loads the version: at the limits a version's rules cost ~0.35 s, and a
restart with hundreds of versions spent minutes on them before serving), once, the
concurrent first requests awaiting the same compile. ``LiveRules``: ``ember dev``'s, the
assets directory's two files, compiled on a thread at the first asset request and again at
the first after either file changes. Each version has one source, which the assets in front
of its worker and its ``env.ASSETS`` share (the binding's spec carries it, never to the
isolate), so a version or an edit costs one compile, not one per reader.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Protocol, runtime_checkable

from ember.bindings.assets.rule_files import HEADERS_FILE, REDIRECTS_FILE
from ember.bindings.assets.rules import NO_RULES, AssetRules, directory_rules

_log = logging.getLogger(__name__)
# The two files' (mtime, size, inode), None where one is missing: a change of either is a change.
FilesKey = tuple[tuple[int, int, int] | None, ...]


@runtime_checkable
class RulesSource(Protocol):
    """A deployment's rules: ``now`` without waiting when they are compiled and current,
    else None (then ``await get()``)."""

    def now(self) -> AssetRules | None: ...

    async def get(self) -> AssetRules: ...


class FixedRules:
    """Rules known already (``NO_RULES``: a site without rule files)."""

    def __init__(self, rules: AssetRules = NO_RULES) -> None:
        self._rules = rules

    def now(self) -> AssetRules:
        return self._rules

    async def get(self) -> AssetRules:
        return self._rules


class CompiledOnce:
    """``compile()`` run once, on a thread, when the rules are first asked for."""

    def __init__(self, compile: Callable[[], AssetRules], executor: Executor | None = None) -> None:
        self._compile = compile
        # Pure Python holding the GIL: many versions compiling at once on the default
        # executor's threads stalled the serving loop (~260-340 ms with 8-32; review19). The
        # platform passes one thread for every version's compiles.
        self._executor = executor
        self._rules: AssetRules | None = None
        self._pending: asyncio.Future[AssetRules] | None = None
        self.compiles = 0  # how many times compile() ran: 0 until the first asset request
        self.compiled_on = ""  # the name of the thread that ran it

    def now(self) -> AssetRules | None:
        return self._rules

    async def get(self) -> AssetRules:
        if self._rules is not None:
            return self._rules
        if self._pending is None:
            loop = asyncio.get_running_loop()
            self._pending = loop.run_in_executor(self._executor, self._run)
        # Shielded: a request cancelled while it waits leaves the compile to the others.
        self._rules = await asyncio.shield(self._pending)
        return self._rules

    def _run(self) -> AssetRules:
        self.compiles += 1
        self.compiled_on = threading.current_thread().name
        return self._compile()


class LiveRules:
    """``ember dev``'s rules: the directory's two files, compiled on a thread when first asked
    for and when asked for after either changed, once per change however many requests (of
    the front or of ``env.ASSETS``) ask meanwhile. An edit's warnings (skipped lines, a folded
    Set-Cookie) go to ``on_warning``, once, after its compile; those of the files as they were
    when this was made are the config's warnings, which ``ember dev`` shows itself."""

    def __init__(
        self,
        directory: Path,
        html_handling: str,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self._directory = directory
        self._html = html_handling
        self._warn = on_warning or (lambda note: _log.warning("%s", note))
        self._shown = self._stat()
        self._key: FilesKey | None = None  # the files as last compiled (None: never)
        self._rules: AssetRules | None = None
        self._pending: asyncio.Future[AssetRules] | None = None
        self.compiles = 0  # how many times the files were compiled: 0 until the first ask

    def now(self) -> AssetRules | None:
        """The rules, when compiled from the files as they are (two stats); else None."""
        if self._rules is not None and self._stat() == self._key:
            return self._rules
        return None

    async def get(self) -> AssetRules:
        rules = self.now()
        if rules is not None:
            return rules
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._refresh())
        # Shielded: a request cancelled while it waits leaves the compile to the others.
        return await asyncio.shield(self._pending)

    async def _refresh(self) -> AssetRules:
        try:
            key, rules, notes = await asyncio.to_thread(self._compile)
        finally:
            self._pending = None
        # Set with no await since the compile ended: no ask can start a second one for it.
        self._key, self._rules = key, rules
        if key != self._shown:
            for note in notes:
                self._warn(note)
        return rules

    def _compile(self) -> tuple[FilesKey, AssetRules, list[str]]:
        self.compiles += 1  # one at a time (``_pending``): no other thread counts meanwhile
        # Stat first: a file written while it is read is a change the next ask compiles.
        key = self._stat()
        rules, notes = directory_rules(self._directory, self._html)
        return key, rules, notes

    def _stat(self) -> FilesKey:
        return tuple(_stat_key(self._directory / name) for name in (REDIRECTS_FILE, HEADERS_FILE))


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)
