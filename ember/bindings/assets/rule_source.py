"""Where a deployment's compiled ``_redirects`` / ``_headers`` come from, compiled off the
event loop that serves every tenant.

``CompiledOnce``: a deployed version's, compiled on a thread at its first asset request (not
when ``ember serve`` loads the version: at the limits a version's rules cost ~0.35 s, and a
restart with hundreds of versions spent minutes on them before serving), once, the
concurrent first requests awaiting the same compile. ``LiveRules`` (``rules.py``) is
``ember dev``'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ember.bindings.assets.rules import NO_RULES, AssetRules


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

    def __init__(self, compile: Callable[[], AssetRules]) -> None:
        self._compile = compile
        self._rules: AssetRules | None = None
        self._pending: asyncio.Future[AssetRules] | None = None
        self.compiles = 0  # how many times compile() ran: 0 until the first asset request

    def now(self) -> AssetRules | None:
        return self._rules

    async def get(self) -> AssetRules:
        if self._rules is not None:
            return self._rules
        if self._pending is None:
            self._pending = asyncio.ensure_future(asyncio.to_thread(self._run))
        # Shielded: a request cancelled while it waits leaves the compile to the others.
        self._rules = await asyncio.shield(self._pending)
        return self._rules

    def _run(self) -> AssetRules:
        self.compiles += 1
        return self._compile()
