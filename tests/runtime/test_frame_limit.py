"""A frame past the limit is refused where it is made, not sent to kill the connection."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ember.errors import BindingError
from ember.runtime.fields import MAX_FRAME_BYTES
from ember.runtime.frames import FrameWriter
from ember.runtime.protocol import Call
from tests.runtime.harness import Harness, write_project


def test_the_writer_refuses_an_oversized_frame_and_keeps_the_rest() -> None:
    async def main() -> None:
        writer = FrameWriter()
        writer.send(Call(1, 1, "KV", "get", ["small"], 0))
        with pytest.raises(BindingError, match="frame limit"):
            writer.send(Call(2, 1, "KV", "put", ["k", "x" * (MAX_FRAME_BYTES + 1)], 0))
        assert len(writer.take()) < 200  # the first frame only

    asyncio.run(main())


WORKER = """
from workers import Response


async def on_fetch(request, env):
    if request.url.endswith("/huge"):
        try:
            await env.AI.gateway("g").patchLog("x", {"metadata": {"k": "v" * 1_200_000}})
        except Exception as exc:
            return Response(type(exc).__name__ + ": " + str(exc)[:80], status=400)
    return Response("alive")
"""


def test_a_binding_call_too_large_for_a_frame_fails_in_the_handler_only(
    harness: Harness, tmp_path: Path
) -> None:
    root = write_project(tmp_path / "huge", WORKER, config="ai:\n  binding: AI\n")
    worker = harness.deploy(root)
    with harness.client(worker) as client:
        assert client.get("/").text == "alive"
        process = harness.supervisor.isolate(worker)
        refused = client.get("/huge")
        assert refused.status_code == 400 and "frame limit" in refused.text
        assert client.get("/").text == "alive"
    assert harness.supervisor.isolate(worker) is process  # the isolate lived on
