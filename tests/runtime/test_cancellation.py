"""Cancellation runs both ways, down to the binding service (generic, via a test binding type)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ember.runtime.http import HttpRequest
from tests.runtime.harness import Harness, write_project

WORKER = """
import asyncio
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kind = request.headers.get("x-kind")
        tag = request.headers.get("x-tag", "")
        if kind == "wait":
            try:
                await self.env.SLOW.wait(tag)
            finally:
                print("handler finished", tag)
        if kind == "gather":  # a child of the handler's own; waitUntil work beside it
            if request.headers.get("x-bg"):
                self.ctx.wait_until(asyncio.sleep(5))

            async def late():
                try:
                    await asyncio.sleep(0.8)
                except asyncio.CancelledError:
                    print("late child cancelled", tag)
                    raise
                print("late child still running", tag)
                await self.env.SLOW.wait(tag)

            await asyncio.gather(late())
        if kind == "timeout":
            try:
                await asyncio.wait_for(self.env.SLOW.wait(tag), 0.1)
            except asyncio.TimeoutError:
                return Response("timed out")
        if kind == "stream":
            stream = await self.env.SLOW.stream(tag)
            return Response(stream, headers={"content-type": "text/event-stream"})
        if kind == "held":
            stream = await self.env.SLOW.held(tag)
            return Response(stream, headers={"content-type": "text/event-stream"})
        if kind == "partial":
            stream = await self.env.SLOW.stream(tag)
            seen = []
            async for chunk in stream:
                seen.append(chunk)
                if len(seen) == 2:
                    break
            await stream.cancel()
            return Response(b"".join(seen))
        return Response(str(await self.env.SLOW.echo(1, "two", {"three": 3})))
"""


@pytest.fixture(scope="module")
def slow(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = write_project(
        tmp_path_factory.mktemp("slow") / "slow", WORKER, "slow:\n  binding: SLOW\n"
    )
    return harness.deploy(root)


def test_a_new_binding_type_works_through_the_registry(harness: Harness, slow: str) -> None:
    with harness.client(slow) as client:
        assert client.get("/").text == "[1, 'two', {'three': 3}]"


def test_client_disconnect_cancels_the_handler_and_the_service_call(
    harness: Harness, slow: str
) -> None:
    tracker = harness.tracker()
    with harness.client(slow, timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/", headers={"x-kind": "wait", "x-tag": "gone"})
    harness.wait_for(lambda: tracker.get("wait-cancelled:gone") == 1)
    harness.wait_for(lambda: "handler finished gone" in harness.console(slow))
    process = harness.supervisor.isolate(slow)
    assert process is not None
    harness.wait_for(lambda: process.calls.active == 0)


def test_handler_timeout_cancels_the_service_call(harness: Harness, slow: str) -> None:
    tracker = harness.tracker()
    with harness.client(slow) as client:
        assert client.get("/", headers={"x-kind": "timeout", "x-tag": "t"}).text == "timed out"
    harness.wait_for(lambda: tracker.get("wait-cancelled:t") == 1)


def test_client_leaving_a_streamed_reply_closes_the_service_stream(
    harness: Harness, slow: str
) -> None:
    tracker = harness.tracker()
    with harness.client(slow) as client:
        with client.stream("GET", "/", headers={"x-kind": "stream", "x-tag": "s"}) as response:
            chunks = response.iter_bytes()
            assert next(chunks).startswith(b"data: 0")
    harness.wait_for(lambda: tracker.get("stream-closed:s") == 1)
    assert tracker.get("stream-started:s") == 1


def test_handler_abandoning_a_stream_closes_the_service_stream(harness: Harness, slow: str) -> None:
    tracker = harness.tracker()
    with harness.client(slow) as client:
        assert (
            client.get("/", headers={"x-kind": "partial", "x-tag": "p"}).text
            == "data: 0\n\ndata: 1\n\n"
        )
    harness.wait_for(lambda: tracker.get("stream-closed:p") == 1)


def test_a_cancel_read_with_its_request_still_ends_the_request(harness: Harness, slow: str) -> None:
    """The HTTP fast path cancels the moment a client resets, so a Cancel may follow its Request
    in the same write, and the isolate read both at once: its task for the request was then
    cancelled before its first step, never sent Done, and the supervisor, seeing the request
    ignore its cancellation, killed the isolate with every other request in it."""
    with harness.client(slow) as client:
        assert client.get("/").status_code == 200  # an isolate is ready
    process = harness.supervisor.isolate(slow)
    assert process is not None

    async def request_and_cancel() -> str:
        headers = [("x-kind", "wait"), ("x-tag", "read-with-cancel")]
        pending = harness.supervisor.fetch_ready(slow, HttpRequest("GET", "http://c/", headers))
        assert pending is not None
        pending.client_gone()  # in the same turn of the loop: one write carries both frames
        # (a bound far above what it takes; without Done it would wait for the wall limit)
        return await asyncio.wait_for(asyncio.shield(pending.finished), 20)

    assert harness.run(request_and_cancel()) == "canceled"
    assert harness.supervisor.isolate(slow) is process and process.accepting
    with harness.client(slow) as client:
        assert client.get("/").status_code == 200


@pytest.mark.parametrize("kind", ["echo", "held"])
def test_a_response_arriving_as_its_waiter_is_cancelled_ends_only_that_request(
    harness: Harness, slow: str, kind: str
) -> None:
    """uvicorn's path awaits a request's head future directly, and cancels its task when the
    client leaves: cancelling a task cancels the future it awaits at once, while the task runs
    ``client_gone`` only on its next step. A response (inline, or a binding's stream handed
    back) read in between found the head done with no cancellation sent, was taken for a second
    response, and the isolate was killed with every other request in it (``protocol_error``)."""
    with harness.client(slow) as client:
        assert client.get("/").status_code == 200  # an isolate is ready
    process = harness.supervisor.isolate(slow)
    assert process is not None
    tracker = harness.tracker()
    tag = f"cancelled-waiter-{kind}"

    async def cancel_the_waiter_then_respond() -> str:
        headers = [("x-kind", kind), ("x-tag", tag)]
        pending = harness.supervisor.fetch_ready(slow, HttpRequest("GET", "http://c/", headers))
        assert pending is not None
        pending.head.cancel()  # what Task.cancel does to the future the router's task awaits
        # The isolate's response is read while client_gone has not run; without it nothing
        # else ends the request (a bound far above what it takes).
        outcome = await asyncio.wait_for(asyncio.shield(pending.finished), 20)
        pending.client_gone()  # the router's task, resumed at last: nothing left to do
        return outcome

    assert harness.run(cancel_the_waiter_then_respond()) == "canceled"
    assert harness.supervisor.isolate(slow) is process and process.accepting
    if kind == "held":  # the binding's stream, never sent, was closed
        harness.wait_for(lambda: tracker.get(f"stream-closed:{tag}") == 1)
    with harness.client(slow) as client:
        assert client.get("/").status_code == 200


@pytest.mark.parametrize("background", ["", "1"])
def test_client_disconnect_cancels_the_handlers_own_children(
    harness: Harness, slow: str, background: str
) -> None:
    """What the handler awaits of its own (a gather of a child task) is cancelled with it: a
    child left running started a binding call after the client had gone (review20, when a
    client's leaving only unhooked the handler from what it awaited)."""
    tag = f"child{background}"
    headers = {"x-kind": "gather", "x-tag": tag, "x-bg": background}
    with harness.client(slow, timeout=0.3) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/", headers=headers)
    ended = (f"late child cancelled {tag}", f"late child still running {tag}")
    harness.wait_for(lambda: any(line in ended for line in harness.console(slow)))
    assert f"late child cancelled {tag}" in harness.console(slow)
