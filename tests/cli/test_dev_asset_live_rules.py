"""``ember dev``'s ``_headers`` / ``_redirects`` after an edit, in a real dev server on this
loop: one ``LiveRules`` for the assets in front of the worker and for ``env.ASSETS``, compiled
on a thread once per change (its ``compiles`` counter is the seam), its warnings said once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from ember.bindings.assets.rule_source import LiveRules
from ember.runtime import events as E
from ember.runtime.devserver import DevOptions, DevServer
from tests.asset_projects import asset_project

T = TypeVar("T")
ENTRY = """
from urllib.parse import urlparse
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if urlparse(request.url).path == "/via-binding":
            return await self.env.ASSETS.fetch("http://any.host/")
        return Response("worker")

    async def scheduled(self, controller, env, ctx):
        # env.ASSETS with no request in front: the assets there never ask for the rules.
        found = await self.env.ASSETS.fetch("http://any.host/")
        print("x-rule=" + str(found.headers.get("x-rule")))
"""


class LoopServer:
    """A real ``ember dev`` (uvicorn on 127.0.0.1, the worker in its isolate) on an event loop
    that runs, in this thread, only while a client runs in a worker thread."""

    def __init__(self, project: Path, state: Path) -> None:
        self.sink = E.ListSink()
        options = DevOptions(project=project, ip="127.0.0.1", port=0, persist_to=state, watch=False)
        self.server = DevServer(options, self.sink)
        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(self.server.serve())
        self.loop.run_until_complete(self._started())

    async def _started(self) -> None:
        while self.server.url is None:
            if self.task.done():
                self.task.result()
                raise AssertionError("ember dev stopped")
            await asyncio.sleep(0.01)

    def client(self, work: Callable[[], T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(asyncio.to_thread(work), 120))

    def get(self, path: str) -> httpx.Response:
        return self.client(lambda: httpx.get(f"{self.server.url}{path}", timeout=60))

    def scheduled(self) -> str:
        """What the worker's ``scheduled`` saw of ``env.ASSETS.fetch("/")``: its X-Rule."""
        before = len(self.sink.events)
        supervisor = self.server.supervisor
        assert supervisor is not None  # invariant: serving
        done = self.loop.run_until_complete(
            supervisor.scheduled(self.server.deployment.id, "* * * * *")
        )
        assert done.outcome == "ok", done
        said = [e.message for e in self.sink.events[before:] if isinstance(e, E.ConsoleEvent)]
        assert len(said) == 1, said
        return said[0].removeprefix("x-rule=")

    def warnings(self) -> list[str]:
        return [
            e.message
            for e in self.sink.events
            if isinstance(e, E.LifecycleEvent) and e.level == "warn"
        ]

    def close(self) -> None:
        self.task.cancel()
        self.loop.run_until_complete(asyncio.gather(self.task, return_exceptions=True))
        rest = asyncio.all_tasks(self.loop)
        for task in rest:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
        self.loop.close()


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[LoopServer]:
    public = {"index.html": "home", "_headers": "/*\n  X-Rule: one\n"}
    project = asset_project(tmp_path / "app", ENTRY, public)
    server = LoopServer(project, tmp_path / "state")
    yield server
    server.close()


def test_an_edit_compiles_once_for_the_front_and_env_assets(dev: LoopServer) -> None:
    site = dev.server.assets
    assert site is not None and isinstance(site.rules, LiveRules)
    rules = site.rules
    assert rules.compiles == 0  # nothing at start: the first asset request compiles them
    # env.ASSETS alone (a cron): the compile it causes is the front's rules' too.
    assert dev.scheduled() == "one"
    assert rules.compiles == 1
    assert dev.get("/").headers["x-rule"] == "one"
    assert dev.get("/via-binding").headers["x-rule"] == "one"
    assert rules.compiles == 1

    headers = dev.server.config.root / "public" / "_headers"
    headers.write_text("/*\n  X-Rule: two\n  X-More: yes\n")
    assert dev.scheduled() == "two"
    assert rules.compiles == 2
    front = dev.get("/")
    assert (front.headers["x-rule"], front.headers["x-more"]) == ("two", "yes")
    for path in ("/", "/via-binding", "/", "/via-binding"):
        assert dev.get(path).headers["x-rule"] == "two"
    assert dev.scheduled() == "two"
    assert rules.compiles == 2
    assert dev.warnings() == []

    # An edit's skipped line is said once, by the one compile, whoever asked for it.
    headers.write_text("/*\n  X-Rule: three\n  no colon here\n")
    assert dev.get("/").headers["x-rule"] == "three"
    assert dev.get("/via-binding").headers["x-rule"] == "three"
    assert dev.scheduled() == "three"
    assert rules.compiles == 3
    said = dev.warnings()
    assert len(said) == 1 and "public/_headers:3" in said[0], said
