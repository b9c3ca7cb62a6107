"""Where the AI gateway parses a request whose schemas it must compile: off the supervisor's
event loop, on one thread, each tenant in turn.

The supervisor's loop serves every worker and tenant; compiling a request's schemas may cost
up to an automaton budget (~1 CPU-s, ``constrain/automata.py``), a queued batch's as much in
all. A request that carries schemas (``carries_schemas``) is parsed on the lane, a thread of
its own: one thread, not asyncio's pool of up to 32, since compiles hold the GIL and the loop's
share of it is one in (compiling threads + 1). The lane is first come, first served, so each
tenant has at most one job on it (``turn``), the others waiting their tenant's turn on the
loop, where waiting costs nothing: one tenant sending many costly schemas delays another by at
most one of its jobs, not all of them (review38: 8.1 s behind six of them). A tenant is an
account (its data scope): its workers share one turn (review39: six workers took six).

With ``compile_worker``, the automata themselves are built by the compile worker process
(``constrain/automaton_cache.py``, as in the model server) while the lane lives: a costly
pattern then holds none of the supervisor's GIL, only the lane's thread waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ember.models.api.schema_fields import carries_schemas
from ember.models.constrain.automaton_cache import SHARED_AUTOMATA
from ember.models.constrain.compile_client import CompileWorkerFailed

T = TypeVar("T")


class LaneClosed(CompileWorkerFailed):
    """A request reached the lane after the gateway closed (a 3040: retry)."""

    def __init__(self) -> None:
        super().__init__("the AI gateway is shutting down; retry")


class SchemaLane:
    """See the module docstring. One per gateway; ``close`` at the gateway's ``aclose``."""

    def __init__(self, compile_worker: bool = False) -> None:
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ember-ai-schemas")
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # tenant -> (its turn, waiting)
        self._closed = False
        self._compile_worker = compile_worker
        if compile_worker:
            SHARED_AUTOMATA.attach_worker()

    async def parsed(
        self,
        tenant: str,
        body: object,
        parse: Callable[..., T],
        *args: Any,
        admit: Callable[[], None] | None = None,
    ) -> T:
        """``parse(*args)``: at once when ``body`` carries no schema, else on the lane in
        ``tenant``'s turn (``run``)."""
        if not carries_schemas(body):
            return parse(*args)
        return await self.run(tenant, parse, *args, admit=admit)

    async def run(
        self,
        tenant: str,
        parse: Callable[..., T],
        *args: Any,
        admit: Callable[[], None] | None = None,
    ) -> T:
        """``parse(*args)`` on the lane, in ``tenant``'s turn. ``admit()``, called when the
        turn comes, raises to refuse the job before it costs anything (the tenant's quota,
        as its earlier jobs have left it: review38's six requests of a tenant allowed one a
        minute each compiled before five were refused)."""
        async with self._turn(tenant):
            if self._closed:
                raise LaneClosed()
            if admit is not None:
                admit()
            job = self._thread.submit(parse, *args)
            try:
                return await asyncio.wrap_future(job)
            except asyncio.CancelledError:
                # Cancelled by ``aclose`` before it ran, not by its caller: a "retry".
                task = asyncio.current_task()
                if self._closed and job.cancelled() and task is not None and not task.cancelling():
                    raise LaneClosed() from None
                raise

    @asynccontextmanager
    async def _turn(self, tenant: str) -> AsyncIterator[None]:
        lock, waiting = self._turns.get(tenant, (asyncio.Lock(), 0))
        self._turns[tenant] = (lock, waiting + 1)
        try:
            async with lock:
                yield
        finally:
            lock, waiting = self._turns[tenant]
            if waiting == 1:
                del self._turns[tenant]  # no tenant's entry outlives its last job
            else:
                self._turns[tenant] = (lock, waiting - 1)

    async def aclose(self) -> None:
        """Take no more jobs: those queued, and those still waiting for their tenant's turn,
        are answered ``LaneClosed`` (a "retry"); the one running finishes (its request gets its
        answer). The compile worker is let go (stopped when no one else holds it) only then:
        a queued job left to run after it (review42) compiled its schemas in this process, the
        supervisor's, while it shut down. Both waits are off the loop."""
        self._closed = True
        self._thread.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._thread.shutdown, wait=True)
        if self._compile_worker:
            self._compile_worker = False
            await asyncio.to_thread(SHARED_AUTOMATA.detach_worker)
