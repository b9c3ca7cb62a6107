"""The event loop ember's long-running processes run on: uvloop where installed, as uvicorn does.

uvicorn's default (``loop="auto"``) runs on uvloop when it is installed, but only when uvicorn
creates the loop itself; ``ember dev`` and the isolates create their own loops, so they pick the
same way here. uvloop roughly halves the per-callback and per-write cost of the loop, which is
most of what the supervisor<->isolate hop costs. Without it (it is optional) the standard
asyncio loop is used and everything behaves the same, only slower.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """``uvloop.new_event_loop`` if uvloop is importable, else ``asyncio.new_event_loop``."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``loop_factory`` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
