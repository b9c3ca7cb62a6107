"""``ember dev``'s paths that run a scheduled handler by hand, as ``wrangler dev`` serves them.

wrangler always starts Miniflare with its trigger handlers on (``unsafeTriggerHandlers: true``
in wrangler's ``dev/miniflare``), so Miniflare's scheduled path answers with or without
``--test-scheduled`` (Cloudflare's Python Workers cron example gives that curl with no flag);
only wrangler's own ``/__scheduled`` middleware needs the flag. A worker without the flag that
got ``/cdn-cgi/handler/scheduled`` sent to its fetch handler answered 200 and ran no cron.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.cli.devprocess import DevProcess

WORKER = """
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        print(f"cron ran: {controller.cron}")

    async def fetch(self, request):
        return Response("fetch handler")
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "cron"
    project.mkdir()
    (project / "worker.py").write_text(WORKER)
    (project / "ember.yaml").write_text(
        "name: cron\nmain: worker.py\ntriggers:\n  crons: ['*/5 * * * *']\n"
    )
    return project


def test_miniflare_scheduled_paths_run_the_cron_without_test_scheduled(tmp_path: Path) -> None:
    with DevProcess(_project(tmp_path), "--no-crons", state=tmp_path / "state") as dev:
        handler = httpx.get(f"{dev.url}/cdn-cgi/handler/scheduled", params={"cron": "* * * * *"})
        local = httpx.get(f"{dev.url}/cdn-cgi/local/scheduled", params={"cron": "0 * * * *"})
        wrangler = httpx.get(f"{dev.url}/__scheduled", params={"cron": "1 * * * *"})
        dev.wait_for_line("cron ran: 0 * * * *")
    assert (handler.status_code, handler.text) == (200, "ok")
    assert (local.status_code, local.text) == (200, "ok")
    assert "cron ran: * * * * *" in dev.lines
    # wrangler's own path is its --test-scheduled middleware: without the flag, the worker's.
    assert (wrangler.status_code, wrangler.text) == (200, "fetch handler")
    assert "cron ran: 1 * * * *" not in dev.lines


def test_test_scheduled_adds_wranglers_path(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with DevProcess(project, "--no-crons", "--test-scheduled", state=tmp_path / "state") as dev:
        wrangler = httpx.get(f"{dev.url}/__scheduled", params={"cron": "1 * * * *"})
        handler = httpx.get(f"{dev.url}/cdn-cgi/handler/scheduled", params={"format": "json"})
        dev.wait_for_line("cron ran: 1 * * * *")
    assert (wrangler.status_code, wrangler.text) == (200, "Ran scheduled event\n")
    assert handler.json() == {"outcome": "ok", "noRetry": False}
