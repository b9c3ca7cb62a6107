"""Handlers started inside the read (``EventRunner(direct=True)``) against the reference.

The reference (``direct=False``) starts each event's handler in its task's first step, one loop
iteration after the read. The fast path starts it at once and lets the task take over where it
first suspends. Both are driven in-process with the same random handlers and the same batches
of Request and Cancel frames (each batch delivered from a loop callback, as ``data_received``
does); every request's frames, and what its handler saw (its task, its scope), must match.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from ember.bindings.env import Env
from ember.runtime.isolate import api
from ember.runtime.isolate.channel import IsolateChannel
from ember.runtime.isolate.events import EventRunner
from ember.runtime.isolate.handlers import Entrypoints
from ember.runtime.isolate.scope import CURRENT
from ember.runtime.mux import Mux
from ember.runtime.protocol import Cancel, Message, Request

SUSPENSIONS = ("none", "sleep0", "sleeps", "timer", "timeout", "taskgroup", "hang", "gather")
ENDINGS = ("response", "response", "json", "raise", "invalid", "empty")


@dataclass(frozen=True)
class Program:
    """What one request's handler does."""

    suspension: str
    sleeps: int
    wait_until: str  # "", "ok", "raise"
    ending: str
    status: int
    body: bytes


def random_program(rng: random.Random) -> Program:
    return Program(
        suspension=rng.choice(SUSPENSIONS),
        sleeps=rng.randint(1, 4),
        wait_until=rng.choice(("", "", "ok", "raise")),
        ending=rng.choice(ENDINGS),
        status=rng.choice((200, 201, 404, 500)),
        body=rng.randbytes(rng.randint(0, 300)),
    )


async def _background(kind: str) -> None:
    await asyncio.sleep(0)
    if kind == "raise":
        raise LookupError("background failed")


def make_handler(programs: dict[str, Program], seen: dict[int, list[Any]]) -> Any:
    async def fetch(request: Any, env: Any, ctx: Any) -> Any:
        program = programs[request.url.rsplit("/", 1)[1]]
        scope = CURRENT.get()
        notes = seen[scope.rid]
        task = asyncio.current_task()
        notes.append(("started", task is not None))
        if program.wait_until:
            ctx.wait_until(_background(program.wait_until))
        kind = program.suspension
        if kind == "sleep0":
            await asyncio.sleep(0)
        elif kind == "sleeps":
            for _ in range(program.sleeps):
                await asyncio.sleep(0)
        elif kind == "timer":
            await asyncio.sleep(0.001)
        elif kind == "timeout":
            async with asyncio.timeout(5):
                await asyncio.sleep(0)
        elif kind == "taskgroup":
            async with asyncio.TaskGroup() as group:
                group.create_task(asyncio.sleep(0))
        elif kind == "gather":
            await asyncio.gather(asyncio.sleep(0), _background("ok"))
        elif kind == "hang":
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                notes.append(("cancelled", asyncio.current_task() is task))
                raise
        notes.append(("resumed", asyncio.current_task() is task, CURRENT.get() is scope))
        if program.ending == "raise":
            raise ValueError(f"handler failed with {len(program.body)}")
        if program.ending == "invalid":
            return {"not": "a response"}
        if program.ending == "json":
            return api.Response.json({"size": len(program.body)}, status=program.status)
        if program.ending == "empty":
            return api.Response(None, status=204)
        return api.Response(program.body, status=program.status, headers={"x-n": "1"})

    async def call(first: Any, env: Any, ctx: Any) -> Any:
        return await fetch(first, env, ctx)

    return call


async def run(direct: bool, programs: dict[str, Program], batches: list[list[Message]]) -> Any:
    """Deliver the batches one per loop callback; every request's frames and notes."""
    frames: dict[int, list[Any]] = defaultdict(list)
    seen: dict[int, list[Any]] = defaultdict(list)

    def send(message: Message) -> None:
        frames[getattr(message, "rid", 0)].append(message)

    mux = Mux(send)
    entry = Entrypoints(fetch=make_handler(programs, seen), scheduled=None)
    runner = EventRunner(entry, Env({}, {}, {}), send, mux, IsolateChannel(send, mux), direct)
    loop = asyncio.get_running_loop()
    for batch in batches:
        delivered = loop.create_future()

        def deliver(batch: list[Message] = batch, delivered: Any = delivered) -> None:
            for message in batch:  # from a callback: no task is current, as in data_received
                runner.on_event(message)  # type: ignore[arg-type]
            delivered.set_result(None)

        loop.call_soon(deliver)
        await delivered
        for _ in range(8):  # let every suspended handler reach its hang (or finish)
            await asyncio.sleep(0)
    for _ in range(500):
        if not runner.events:
            break
        await asyncio.sleep(0.002)
    assert not runner.events, f"events left: {sorted(runner.events)}"
    return dict(frames), dict(seen)


@pytest.mark.parametrize("seed", range(12))
def test_direct_start_matches_the_task_start(seed: int) -> None:
    rng = random.Random(seed)
    programs: dict[str, Program] = {}
    batches: list[list[Message]] = []
    hanging: list[int] = []
    rid = 0
    for _ in range(rng.randint(3, 10)):
        batch: list[Message] = []
        # Cancel hanging handlers of earlier batches (both paths have reached the hang by now).
        rng.shuffle(hanging)
        while hanging and rng.random() < 0.7:
            batch.append(Cancel(hanging.pop(), rng.random() < 0.5))
        for _ in range(rng.randint(1, 12)):
            rid += 1
            program = random_program(rng)
            programs[str(rid)] = program
            url = f"http://worker.test/p/{rid}"
            batch.insert(rng.randint(0, len(batch)), Request(rid, "GET", url, [], None, 0))
            if program.suspension == "hang":
                hanging.append(rid)
        batches.append(batch)
    batches.append([Cancel(r, True) for r in hanging])

    async def both() -> tuple[Any, Any]:
        return await run(False, programs, batches), await run(True, programs, batches)

    (ref_frames, ref_seen), (fast_frames, fast_seen) = asyncio.run(both())
    assert fast_frames == ref_frames
    assert fast_seen == ref_seen
    assert all(notes[0] == ("started", True) for notes in fast_seen.values())
    kinds = {type(m).__name__ for ms in fast_frames.values() for m in ms}
    assert {"Response", "RequestError", "Done"} <= kinds  # the random mix covers them


def test_a_handler_cancelled_before_its_task_ran_is_cancelled_where_it_suspended() -> None:
    """Request and Cancel in one read: the started handler sees the cancellation and ends.

    (The reference never starts such a handler: its task is cancelled before its first step.)
    """
    program = Program("hang", 1, "", "response", 200, b"x")
    batches: list[list[Message]] = [
        [Request(1, "GET", "http://worker.test/p/1", [], None, 0), Cancel(1, False)]
    ]
    frames, seen = asyncio.run(run(True, {"1": program}, batches))
    assert seen[1] == [("started", True), ("cancelled", True)]
    assert [type(m).__name__ for m in frames[1]] == ["Done"]
