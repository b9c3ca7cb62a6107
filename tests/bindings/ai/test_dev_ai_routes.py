"""``ember dev`` with an ``ai`` binding answers the platform's AI paths itself; with
``--no-ai-routes`` a worker's own routes under those paths are reachable, as once deployed."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from tests.bindings.ai.dev_support import run_dev

WORKER = """
from workers import Response

async def on_fetch(request, env):
    return Response("worker answered " + request.url)
"""
PATHS = ("/ai/v1/models", "/client/v4/accounts/acct/ai/models/search")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "worker.py").write_text(WORKER)
    config = {"name": "routes", "main": "worker.py", "ai": {"binding": "AI"}}
    (tmp_path / "ember.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


def test_ember_answers_the_ai_paths_by_default(project: Path) -> None:
    for dev in run_dev(project):
        for path in PATHS:
            answer = httpx.get(dev.url + path, timeout=30)
            assert answer.status_code == 200 and "worker answered" not in answer.text
        assert httpx.get(dev.url + "/other", timeout=30).text.startswith("worker answered")


def test_no_ai_routes_sends_those_paths_to_the_worker(project: Path) -> None:
    for dev in run_dev(project, "--no-ai-routes"):
        for path in PATHS:
            answer = httpx.get(dev.url + path, timeout=30)
            assert answer.status_code == 200, answer.text
            assert answer.text == f"worker answered {dev.url}{path}"
