"""A binding's reply returned unread as the response: sent by the supervisor, never the isolate.

The pass-through (``PipeResponse``) is the fast path; a handler that reads or transforms the
stream goes through the isolate as before, and is the slow reference the fast path is compared
with on fresh random input. Limits, disconnects and the isolate's death end both alike.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import httpx
import pytest

from tests.runtime.harness import Harness, write_project
from tests.runtime.slow_binding import random_chunks

WORKER = """
import os
from workers import Response, WorkerEntrypoint
from ember.runtime.isolate.scope import current_scope
from ember.runtime.protocol import PipeResponse, encode

SSE = {"content-type": "text/event-stream"}


async def relay(stream):
    async for chunk in stream:
        yield chunk


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kind = request.headers.get("x-kind")
        tag = request.headers.get("x-tag", "")
        seed = int(request.headers.get("x-seed", "0"))
        count = int(request.headers.get("x-chunks", "0"))
        if kind == "pipe":
            return Response(await self.env.SLOW.random(seed, count), headers=SSE)
        if kind == "relay":
            return Response(relay(await self.env.SLOW.random(seed, count)), headers=SSE)
        if kind == "upper":
            stream = await self.env.SLOW.stream(tag)

            async def upper():
                seen = 0
                async for chunk in stream:
                    yield chunk.upper()
                    seen += 1
                    if seen == 3:
                        await stream.cancel()
                        return

            return Response(upper(), headers=SSE)
        if kind == "forever":
            return Response(await self.env.SLOW.stream(tag), headers=SSE)
        if kind == "forever-relay":
            return Response(relay(await self.env.SLOW.stream(tag)), headers=SSE)
        if kind == "forge":  # a hostile isolate names a stream that never existed
            frame = encode(PipeResponse(current_scope().rid, 200, [], 999_999))
            for fd in range(3, 64):
                try:
                    os.write(fd, frame)
                except OSError:
                    pass
        if kind == "pid":
            return Response(str(os.getpid()))
        return Response("fine")
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(
        tmp_path_factory.mktemp("pipe") / "pipe", WORKER, "slow:\n  binding: SLOW\n"
    )


@pytest.fixture(scope="module")
def piping(harness: Harness, project: Path) -> str:
    return harness.deploy(project)


def _piped(harness: Harness, deployment: str) -> int:
    process = harness.supervisor.isolate(deployment)
    assert process is not None
    return process.calls.piped


def test_piped_and_relayed_bodies_equal_the_service_stream_on_random_input(
    harness: Harness, piping: str
) -> None:
    rng = random.Random()
    with harness.client(piping) as client:
        for _ in range(4):
            seed, count = rng.randrange(1 << 30), rng.randrange(0, 12)
            expected = b"".join(random_chunks(seed, count))
            headers = {"x-seed": str(seed), "x-chunks": str(count)}
            before = _piped(harness, piping)
            piped = client.get("/", headers={**headers, "x-kind": "pipe"})
            assert _piped(harness, piping) == before + 1  # the supervisor sent it
            relayed = client.get("/", headers={**headers, "x-kind": "relay"})
            assert _piped(harness, piping) == before + 1  # through the isolate, as before
            assert piped.status_code == relayed.status_code == 200
            assert piped.headers["content-type"] == "text/event-stream"
            assert piped.content == relayed.content == expected, (seed, count)


def test_a_transforming_handler_reads_the_stream_as_before(harness: Harness, piping: str) -> None:
    tracker = harness.tracker()
    before = _piped(harness, piping)
    with harness.client(piping) as client:
        response = client.get("/", headers={"x-kind": "upper", "x-tag": "up"})
    assert response.text == "DATA: 0\n\nDATA: 1\n\nDATA: 2\n\n"
    assert _piped(harness, piping) == before
    harness.wait_for(lambda: tracker.get("stream-closed:up") == 1)


@pytest.mark.parametrize("kind", ["forever", "forever-relay"])
def test_client_leaving_closes_the_service_stream_piped_or_not(
    harness: Harness, piping: str, kind: str
) -> None:
    tracker = harness.tracker()
    tag = f"leave-{kind}"
    with harness.client(piping) as client:
        with client.stream("GET", "/", headers={"x-kind": kind, "x-tag": tag}) as response:
            assert next(response.iter_bytes()).startswith(b"data: 0")
    harness.wait_for(lambda: tracker.get(f"stream-closed:{tag}") == 1)
    process = harness.supervisor.isolate(piping)
    assert process is not None
    harness.wait_for(lambda: process.calls.active == 0 and not process.inflight)


@pytest.mark.parametrize(
    ("limits", "tag"),
    [({"max_response_bytes": 400}, "too-large"), ({"wall_ms": 400}, "too-long")],
)
def test_limits_cut_a_piped_body_and_close_the_service_stream(
    harness: Harness, project: Path, limits: dict, tag: str
) -> None:
    tracker = harness.tracker()
    deployment = harness.deploy(project, limits=limits)
    with harness.client(deployment) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/", headers={"x-kind": "forever", "x-tag": tag}).read()
        assert client.get("/").text == "fine"
    assert _piped(harness, deployment) == 1
    harness.wait_for(lambda: tracker.get(f"stream-closed:{tag}") == 1)


def test_the_isolate_dying_ends_a_piped_body(harness: Harness, project: Path) -> None:
    tracker = harness.tracker()
    deployment = harness.deploy(project)
    with harness.client(deployment) as client:
        pid = int(client.get("/", headers={"x-kind": "pid"}).text)
        with pytest.raises(httpx.RemoteProtocolError):
            with client.stream("GET", "/", headers={"x-kind": "forever", "x-tag": "dies"}) as r:
                chunks = r.iter_bytes()
                assert next(chunks).startswith(b"data: 0")
                os.kill(pid, signal.SIGKILL)
                for _ in chunks:
                    pass
        harness.wait_for(lambda: tracker.get("stream-closed:dies") == 1)
        assert client.get("/").text == "fine"  # a new isolate


def test_a_hand_back_of_a_stream_that_never_existed_is_a_protocol_violation(
    harness: Harness, piping: str
) -> None:
    with harness.client(piping) as client:
        forged = client.get("/", headers={"x-kind": "forge"})
        assert client.get("/").text == "fine"
    assert (forged.status_code, forged.headers["x-ember-error"]) == (502, "protocol_error")
