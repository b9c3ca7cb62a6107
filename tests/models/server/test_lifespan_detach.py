"""The model server's shutdown stops its compile worker off the event loop (review39 #5): the
last ``detach_worker`` waits for the worker's current job (up to its 10 s limit, then 2 s for
the process), and run on the loop it stopped every other coroutine meanwhile."""

from __future__ import annotations

import asyncio
import threading

from ember.models.constrain.automaton_cache import SHARED_AUTOMATA
from ember.models.server.app import build_app
from ember.models.server.settings import ServerSettings
from ember.models.server.state import ServerState

# ~13,000 states whose closures are quadratic: a few tenths of a second of the worker, built
# with no budget (a job as long as any a request's budget allows).
SLOW = "^(?:a?a?a?){600}$"


def test_the_lifespan_stops_the_worker_off_the_loop(own_compile_worker: None) -> None:
    app = build_app(ServerState(ServerSettings("m")), load=False)

    async def run() -> int:
        ticks_while_stopping = 0
        stopping = False
        async with app.router.lifespan_context(app):
            worker = SHARED_AUTOMATA.worker
            assert worker is not None
            job = threading.Thread(
                target=worker.compile,
                args=(SLOW, "/p"),
                kwargs={"search": True, "length": (0, None)},
            )
            job.start()
            assert await asyncio.to_thread(worker.in_flight.wait, 30)

            async def tick() -> None:
                nonlocal ticks_while_stopping
                while worker.in_flight.is_set():
                    if stopping:
                        ticks_while_stopping += 1
                    await asyncio.sleep(0)

            ticker = asyncio.create_task(tick())
            await asyncio.sleep(0)
            stopping = True
        await ticker
        await asyncio.to_thread(job.join, 30)
        return ticks_while_stopping

    # The loop ran on while the detach waited for the job: never once when it blocked.
    assert asyncio.run(run()) > 0
    assert SHARED_AUTOMATA.worker is None
