"""The control API's ``LiveHooks`` on ``ember serve``: what a deploy or cron run does live.

The control plane (``ember/runtime/api``) records versions and deployments; these hooks make
them live on the platform (``activation.LiveDeployments``) and keep each worker's cron schedule
(``crons.WorkerCrons``) in step. Apart from ``app.py`` because the API calls them, not requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from ember.runtime.deployments.records import Account

if TYPE_CHECKING:
    from ember.runtime.platform.app import Platform


class PlatformHooks:
    """The control API's ``LiveHooks`` on ``ember serve``."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform

    @asynccontextmanager
    async def deploying(
        self, account: Account, name: str, version_ids: list[str], *, uploaded: bool = False
    ) -> AsyncIterator[None]:
        async with self.platform.live.deploying(account, name, version_ids, uploaded=uploaded):
            yield

    async def prepare(self, account: Account, name: str, version_id: str) -> None:
        await self.platform.live.prepare(account, name, version_id)

    async def reconcile(self, account_id: str, name: str, *, warm: bool = False) -> None:
        await self.platform.live.reconcile(account_id, name, warm=warm)
        self.platform.crons.refresh(account_id, name)

    async def reconcile_account(self, account_id: str, *, warm: bool = False) -> None:
        await self.platform.live.reconcile_account(account_id, warm=warm)
        for slot in self.platform.live.slots():
            if slot.account_id == account_id:
                self.platform.crons.refresh(account_id, slot.script_name)

    async def run_scheduled(self, account: Account, name: str, cron: str) -> dict[str, str]:
        result = await self.platform.crons.run(account.name, name, cron)
        return {"outcome": result.outcome, "message": result.message}
