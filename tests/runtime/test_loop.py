"""Isolates run on uvloop where installed, and behave the same on asyncio's loop without it."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.loop import loop_factory
from ember.runtime.spawner import SpawnerConfig
from tests.runtime.harness import Harness, write_project

WORKER = """
import asyncio
from workers import Response

async def fetch(request, env, ctx):
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    ctx.wait_until(asyncio.sleep(0))
    body = await request.text()
    print("loop", loop)
    return Response(f"{loop} {request.method} {body}", headers={"x-loop": loop})
"""


@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    spawner = SpawnerConfig(preload=("tests.runtime.loops:standard_asyncio",))
    instance = Harness(tmp_path_factory.mktemp("fallback-state"), spawner=spawner)
    yield instance
    instance.close()


def test_the_factory_picks_uvloop_when_it_is_installed() -> None:
    expected = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    assert loop_factory().__module__.split(".")[0] == expected
    loop = loop_factory()()
    try:
        assert isinstance(loop, asyncio.AbstractEventLoop)
    finally:
        loop.close()


@pytest.mark.parametrize("which", ["default", "fallback"])
def test_isolates_serve_alike_on_either_loop(
    which: str, harness: Harness, fallback: Harness, tmp_path: Path
) -> None:
    chosen = harness if which == "default" else fallback
    root = write_project(tmp_path / which, WORKER)
    with chosen.client(chosen.deploy(root)) as client:
        responses = [client.post("/", content=f"body {i}") for i in range(3)]
    loop = loop_factory().__module__.split(".")[0] if which == "default" else "asyncio"
    for i, response in enumerate(responses):
        assert response.status_code == 200
        assert response.text == f"{loop} POST body {i}"
        assert response.headers["x-loop"] == loop
