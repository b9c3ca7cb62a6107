"""``ember dev`` answers a request with the code on disk when the request arrived, as
``wrangler dev`` holds requests while it reloads: an agent's write-then-call loop never reads
the previous version's answer."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import httpx

from tests.cli.devprocess import DevProcess

WORKER = """
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("{body}")
"""
BROKEN = "from workers import Response\n\nasync def on_fetch(request, env)\n    return 1\n"


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(WORKER.format(body="ver0"))
    (project / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    return project


def test_a_request_right_after_an_edit_gets_the_new_code(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with DevProcess(project, state=tmp_path / "state") as dev, httpx.Client() as client:
        assert client.get(dev.url, timeout=10).text == "ver0"
        for n in range(1, 13):
            (project / "worker.py").write_text(WORKER.format(body=f"ver{n}"))
            assert client.get(dev.url, timeout=30).text == f"ver{n}"
        # A syntax error is the new code too: its error page, not the last good version.
        (project / "worker.py").write_text(BROKEN)
        page = client.get(dev.url, headers={"accept": "text/plain"}, timeout=30)
        assert page.status_code == 500 and "SyntaxError" in page.text, page.text
        (project / "worker.py").write_text(WORKER.format(body="fixed"))
        assert client.get(dev.url, timeout=30).text == "fixed"
        assert dev.stop() == 0


def test_requests_arriving_during_a_reload_all_wait_for_it(tmp_path: Path) -> None:
    """Several clients at once (the fast HTTP path and uvicorn's: a POST with a body that did
    not come with its head takes uvicorn's), all after the edit: none sees the old version."""
    project = _project(tmp_path)
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert httpx.get(dev.url, timeout=10).text == "ver0"

        def call(i: int) -> str:
            if i % 2:
                return httpx.post(dev.url, content=iter([b"x"] * 3), timeout=30).text
            return httpx.get(dev.url, timeout=30).text

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for n in range(1, 4):
                (project / "worker.py").write_text(WORKER.format(body=f"ver{n}"))
                assert list(pool.map(call, range(8))) == [f"ver{n}"] * 8
        assert dev.stop() == 0
