"""Health checks of one replica over HTTP: ``/health`` probes and the name it serves under.

Torch-free and stateless: the replica owns the state (READY, DEAD) and decides what a failed
probe means; these only ask the server and say what they saw: an answer (and the reason a 503
gives: an ember server names a stalled engine there), no answer in time, or no connection.

An ember server's ``/health`` fails when its engine is stalled (work and no finished step for
``--health-check-timeout``). SGLang's ``/health`` does so only where it runs a generation (the
default since SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION; older servers answer 200 while the
scheduler is stuck), its ``/health_generate`` on every version: SGLang replicas are probed there
(503 after SGLANG_HEALTH_CHECK_TIMEOUT without scheduler output, 20 s; a probe that takes longer
than ``health_timeout_s`` fails first). While busy it answers on the next scheduler output, so it
adds no work; while idle it costs one 1-token generation per probe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

EMBER_HEALTH = "/health"
SGLANG_HEALTH = "/health_generate"


def health_path(backend: str) -> str:
    """The path that fails when the backend's engine is stalled, not only when it is down."""
    return SGLANG_HEALTH if backend == "sglang" else EMBER_HEALTH


@dataclass(frozen=True, slots=True)
class Probe:
    """What one probe saw. ``problem`` None: healthy."""

    problem: str | None
    timed_out: bool = False  # connected (or tried to), and no answer came in time
    refused: bool = False  # nothing listens there (yet: a process still importing)


async def check(
    http: httpx.AsyncClient, url: str | None, timeout: float, path: str = EMBER_HEALTH
) -> Probe:
    """Ask ``path`` once: healthy on 200."""
    try:
        response = await http.get(f"{url}{path}", timeout=timeout)
    except httpx.TimeoutException as exc:
        return Probe(_described(exc), timed_out=True)
    except httpx.ConnectError as exc:
        return Probe(_described(exc), refused=True)
    except httpx.HTTPError as exc:
        return Probe(_described(exc))
    if response.status_code == 200:
        return Probe(None)
    problem = f"{path} answered {response.status_code}"
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        error = response.json().get("error")
        if isinstance(error, dict):  # an OpenAI-style body (ember's /health_generate)
            error = error.get("message")
        if isinstance(error, str) and error:
            problem += f": {error[:300]}"
    return Probe(problem)


async def probe(
    http: httpx.AsyncClient, url: str | None, timeout: float, path: str = EMBER_HEALTH
) -> str | None:
    """None when ``path`` answers 200, else what went wrong."""
    return (await check(http, url, timeout, path)).problem


def _described(exc: httpx.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


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
