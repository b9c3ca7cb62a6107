"""``SSEResponse`` against its reference, starlette's ``StreamingResponse``: the same messages on
random bodies, and the same end when the client leaves (the body closed, nothing raised), with
no cancellation leaking into the server's task."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from ember.models.server.wire import sse_response

SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "method": "POST"}


async def _body(chunks: list[bytes | str], closed: list[str], pause: float = 0.0):  # noqa: ANN202
    try:
        for chunk in chunks:
            if pause:
                await asyncio.sleep(pause)
            yield chunk
    finally:
        closed.append("closed")


async def _connected() -> dict:
    await asyncio.Event().wait()  # the client stays
    raise AssertionError("unreachable")


async def _serve(response, receive) -> tuple[list[dict], int]:  # noqa: ANN001
    """Run ``response`` as a server's task would; its messages and that task's pending
    cancellations afterwards (0: nothing leaked)."""
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)
        await asyncio.sleep(0)

    async def task() -> int:
        await response(SCOPE, receive, send)
        await asyncio.sleep(0.01)  # a leaked cancel would be delivered here
        current = asyncio.current_task()
        assert current is not None
        return current.cancelling()

    return sent, await asyncio.create_task(task())


@pytest.mark.parametrize("seed", range(20))
def test_the_same_messages_as_starlette_on_random_bodies(seed: int) -> None:
    rng = random.Random(seed)
    chunks: list[bytes | str] = [
        rng.randbytes(rng.randint(0, 300)) if rng.random() < 0.7 else "é" * rng.randint(0, 40)
        for _ in range(rng.randint(0, 30))
    ]

    async def run(reference: bool) -> tuple[list[dict], int, list[str]]:
        closed: list[str] = []
        response = sse_response(_body(chunks, closed), reference=reference)
        sent, cancelling = await _serve(response, _connected)
        return sent, cancelling, closed

    fast = asyncio.run(run(False))
    slow = asyncio.run(run(True))
    assert fast == slow
    assert fast[1] == 0 and fast[2] == ["closed"]
    assert fast[0][0]["headers"] == slow[0][0]["headers"]
    assert (b"content-type", b"text/event-stream; charset=utf-8") in fast[0][0]["headers"]


@pytest.mark.parametrize("reference", [False, True])
def test_a_client_that_leaves_closes_the_body_and_ends_the_response(reference: bool) -> None:
    async def run() -> tuple[list[dict], int, list[str]]:
        closed: list[str] = []
        left = asyncio.Event()

        async def receive() -> dict:
            await left.wait()
            return {"type": "http.disconnect"}

        response = sse_response(_body([b"x"] * 10_000, closed, pause=0.001), reference=reference)
        asyncio.get_running_loop().call_later(0.05, left.set)
        sent, cancelling = await _serve(response, receive)
        for _ in range(100):  # starlette leaves the body to be finalized; ours closes it at once
            if closed:
                break
            await asyncio.sleep(0.01)
        return sent, cancelling, closed

    sent, cancelling, closed = asyncio.run(run())
    assert 1 < len(sent) < 10_000, "streaming stopped when the client left"
    assert not any(m.get("more_body") is False for m in sent), "no end-of-body after the client"
    assert cancelling == 0 and closed == ["closed"]


def test_a_disconnect_after_the_end_cancels_nothing() -> None:
    # receive() answers http.disconnect once the response is complete (as uvicorn does): the
    # watcher must not cancel the task that served the request, which has moved on.
    async def run() -> int:
        done = asyncio.Event()

        async def receive() -> dict:
            await done.wait()
            return {"type": "http.disconnect"}

        async def body() -> AsyncIterator[bytes]:
            yield b"data: 1\n\n"
            done.set()
            yield b"data: [DONE]\n\n"

        _, cancelling = await _serve(sse_response(body()), receive)
        return cancelling

    assert asyncio.run(run()) == 0
