"""``RequestScope.close`` ends the request's own tasks and nothing they were waiting on.

The end-to-end case (two requests of a real isolate) is in ``test_stray_tasks.py``; here the
same close runs on both of asyncio's task implementations (C, and the pure-Python one that
other interpreters use), since ending a task without cancelling its future reaches into them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ember.runtime.isolate.scope import RequestScope

TASK_TYPES = {"c": asyncio.Task, "python": asyncio.tasks._PyTask}  # type: ignore[attr-defined]


@pytest.mark.parametrize("impl", sorted(TASK_TYPES))
def test_closing_a_scope_leaves_a_future_its_task_awaited(impl: str) -> None:
    async def main() -> tuple[str, bool, int]:
        loop = asyncio.get_running_loop()
        shared: asyncio.Future[int] = loop.create_future()
        scope = RequestScope(1, None)
        ended: list[str] = []

        async def stray() -> None:
            try:
                await shared
            except asyncio.CancelledError:
                ended.append("cancelled")
                raise

        async def other() -> int:  # another request's task, awaiting the same future
            return await shared

        task: Any = TASK_TYPES[impl](stray(), loop=loop)
        scope.adopt(task)
        beside = asyncio.ensure_future(other())
        await asyncio.sleep(0)  # both are waiting on ``shared`` now
        assert scope.close() == 1
        await asyncio.sleep(0)
        shared.set_result(42)
        return ended[0], task.cancelled(), await beside

    assert asyncio.run(main()) == ("cancelled", True, 42)


@pytest.mark.parametrize("impl", sorted(TASK_TYPES))
def test_closing_a_scope_still_cancels_its_own_waiting_tasks(impl: str) -> None:
    """A task waiting on its own sleep ends promptly, its timer gone (sleep's ``finally``)."""

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        scope = RequestScope(1, None)
        task: Any = TASK_TYPES[impl](asyncio.sleep(3600), loop=loop)
        scope.adopt(task)
        await asyncio.sleep(0)
        scope.close()
        await asyncio.sleep(0)
        return task.cancelled()

    assert asyncio.run(main())
