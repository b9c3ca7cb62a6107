"""Zygote preload hook for tests: isolates run on the standard asyncio loop (uvloop's fallback)."""

from __future__ import annotations

import asyncio


def standard_asyncio() -> None:
    """Make every isolate this zygote forks pick asyncio's loop, as without uvloop installed."""
    from ember.runtime import loop

    loop.loop_factory = lambda: asyncio.new_event_loop  # only inside this test zygote
