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


def test_closing_a_scope_ends_a_task_groups_children_before_the_group() -> None:
    """A TaskGroup whose children await a shared future: woken first, the group aborts its
    children with ``child.cancel()``, which cancels the shared future through the child's
    waiter (review19: half of 200 trials when the set's order put the parent first)."""

    async def trial() -> bool:
        loop = asyncio.get_running_loop()
        shared: asyncio.Future[int] = loop.create_future()
        scope = RequestScope(1, None)

        async def child() -> None:
            await shared

        async def parent() -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(child())
                group.create_task(child())

        # Adopted as the isolate's task factory adopts them: at creation, in order.
        loop.set_task_factory(lambda loop, coro: _adopted(scope, loop, coro))
        loop.create_task(parent())
        for _ in range(3):
            await asyncio.sleep(0)
        loop.set_task_factory(None)
        assert scope.close() == 3
        for _ in range(5):
            await asyncio.sleep(0)
        return shared.cancelled()

    async def main() -> list[bool]:
        return [await trial() for _ in range(20)]

    assert asyncio.run(main()) == [False] * 20


def _adopted(scope: RequestScope, loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task:
    task = asyncio.Task(coro, loop=loop)
    scope.adopt(task)
    return task
