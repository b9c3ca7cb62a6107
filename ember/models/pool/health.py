"""Health checks of one replica over HTTP: ``/health`` probes and the name it serves under.

Torch-free and stateless: the replica owns the state (READY, DEAD) and decides what a failed
probe means; these only ask the server and say what they saw.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import httpx


async def probe(http: httpx.AsyncClient, url: str | None, timeout: float) -> str | None:
    """None when ``/health`` answers 200, else what went wrong."""
    try:
        response = await http.get(f"{url}/health", timeout=timeout)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if response.status_code == 200:
        return None
    return f"/health answered {response.status_code}"


async def served_names(http: httpx.AsyncClient, url: str | None, timeout: float) -> list[str]:
    """The model ids ``/v1/models`` lists, in its order (an attached server may use its own
    name, or list several: aliases, vLLM's LoRA adapters); empty when it does not say."""
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
        response = await http.get(f"{url}/v1/models", timeout=timeout)
        return [str(model["id"]) for model in response.json()["data"]]
    return []


async def until_unhealthy(
    check: Callable[[], Awaitable[str | None]], interval_s: float, unhealthy_after: int
) -> str:
    """Probe every ``interval_s``; return (with the last problem) after ``unhealthy_after``
    failed probes in a row."""
    failures = 0
    problem = ""
    while True:
        await asyncio.sleep(interval_s)
        result = await check()
        if result is None:
            failures = 0
            continue
        failures += 1
        problem = result
        if failures >= unhealthy_after:
            return problem
