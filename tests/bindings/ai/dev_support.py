"""A real ``ember dev`` process for the AI tests: started on a free port, its output read as it
comes (``lines``), stopped when the generator that yielded it closes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.bindings.ai.support import ROOT, models_section, tiny_checkpoints, wait_until

# A worker whose one route calls the tiny GLM (the AI HTTP tests' default project).
HI_WORKER = """
from workers import Response

async def on_fetch(request, env):
    result = await env.AI.run("@cf/zai-org/glm-4.7-flash", {"prompt": "hi", "max_tokens": 3})
    return Response.json(result)
"""


class DevServer:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        wait_until(lambda: bool(self.url) or process.poll() is not None, "ember dev", 60)
        assert self.url, "\n".join(self.lines)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            if line.startswith("Ready on "):
                self.url = line.split()[-1]


def ember_env() -> dict[str, str]:
    """The environment an ``ember`` subprocess of the tests runs with (this checkout first)."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


def run_dev(root: Path, *flags: str) -> Iterator[DevServer]:
    """``ember dev ROOT --port 0 --no-watch FLAGS...``, stopped when the generator closes."""
    command = [sys.executable, "-m", "ember", "dev", str(root), "--port", "0", "--no-watch", *flags]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ember_env()
    )
    try:
        yield DevServer(process)
    finally:
        process.terminate()
        process.wait(30)


def serve_ai_project(
    tmp_path_factory: pytest.TempPathFactory, name: str, worker: str = HI_WORKER
) -> Iterator[DevServer]:
    """A real ``ember dev`` of a project NAME whose ``worker`` calls the tiny GLM."""
    glm, _ = tiny_checkpoints(tmp_path_factory)
    root = tmp_path_factory.mktemp(name)
    (root / "worker.py").write_text(worker)
    config = {
        "name": name,
        "main": "worker.py",
        "ai": {"binding": "AI", "models": models_section(glm)},
    }
    (root / "ember.yaml").write_text(yaml.safe_dump(config))
    yield from run_dev(root)
