"""The seam between the control API and whatever runs the deployments it changes.

The API commits state; ``ember serve`` must then run it. Routes that change what is live call
these hooks: ``deploying`` around a commit that makes versions live (the platform starts them
first and refuses a version that does not load, or, ``uploaded``, a new one it cannot start
now), ``prepare`` for an uploaded version,
``reconcile`` after any other change to a worker (secrets, delete), ``reconcile_account`` after
a claim, and ``run_scheduled`` for ember's authenticated "run this cron now". The control API
served alone (the API tests, in process) uses ``StateOnly``: nothing runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from ember.runtime.deployments.errors import InvalidRequest
from ember.runtime.deployments.records import Account


class LiveHooks(Protocol):
    def deploying(
        self, account: Account, name: str, version_ids: list[str], *, uploaded: bool = False
    ) -> AbstractAsyncContextManager[None]: ...

    async def prepare(self, account: Account, name: str, version_id: str) -> None: ...

    async def reconcile(self, account_id: str, name: str, *, warm: bool = False) -> None: ...

    async def reconcile_account(self, account_id: str, *, warm: bool = False) -> None: ...

    async def run_scheduled(self, account: Account, name: str, cron: str) -> dict[str, str]: ...


class StateOnly:
    """Hooks for a control plane that runs nothing."""

    @asynccontextmanager
    async def deploying(
        self, account: Account, name: str, version_ids: list[str], *, uploaded: bool = False
    ) -> AsyncIterator[None]:
        yield

    async def prepare(self, account: Account, name: str, version_id: str) -> None:
        return None

    async def reconcile(self, account_id: str, name: str, *, warm: bool = False) -> None:
        return None

    async def reconcile_account(self, account_id: str, *, warm: bool = False) -> None:
        return None

    async def run_scheduled(self, account: Account, name: str, cron: str) -> dict[str, str]:
        raise InvalidRequest("this control plane runs no workers (start it with `ember serve`)")
