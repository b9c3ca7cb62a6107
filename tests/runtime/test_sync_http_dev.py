"""Sync HTTP clients under the real ``ember dev``: the example against a local upstream, and
the project's ``limits.subrequests`` counting sync calls."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.cli.devprocess import ROOT, DevProcess
from tests.runtime.harness import write_project
from tests.runtime.upstream import Upstream

COUNTER = """
import requests
from workers import Response


async def on_fetch(request, env):
    answers = []
    for i in range(3):
        try:
            answers.append(str(requests.get(env.UPSTREAM).status_code))
        except requests.ConnectionError as exc:
            answers.append(f"ConnectionError: {exc}")
    return Response("\\n".join(answers))
"""


def test_the_sync_http_example(upstream: Upstream, tmp_path: Path) -> None:
    target = f"{upstream.url}/echo"
    example = ROOT / "examples" / "sync-http"
    with DevProcess(example, "--var", f"UPSTREAM:{target}", state=tmp_path) as dev:
        sync = httpx.get(f"{dev.url}/sync", timeout=30).json()
        asynchronous = httpx.get(f"{dev.url}/async", timeout=30).json()
    assert [r["client"] for r in sync] == ["requests", "urllib3", "httpx.Client"]
    for result in sync + asynchronous:
        assert (result["status"], result["start"][:9]) == (200, '{"method"')
    assert asynchronous[0]["client"] == "httpx.AsyncClient"


def test_ember_dev_counts_sync_calls_against_limits_subrequests(
    upstream: Upstream, tmp_path: Path
) -> None:
    config = f"vars:\n  UPSTREAM: {upstream.url}/echo\nlimits:\n  subrequests: 2\n"
    project = write_project(tmp_path / "counter", COUNTER, config)
    with DevProcess(project, state=tmp_path / "state") as dev:
        lines = httpx.get(dev.url, timeout=30).text.splitlines()
    assert lines[:2] == ["200", "200"]
    assert lines[2].startswith("ConnectionError: ") and "Too many subrequests." in lines[2]
