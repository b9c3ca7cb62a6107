"""``ember dev --env NAME``: a real dev server running the config's ``[env.NAME]``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.cli.devprocess import ROOT, DevProcess

WORKER = """
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response(f"{self.env.STAGE} {self.env.TOKEN}")
"""
EMBER_YAML = """\
name: app
main: worker.py
vars: {STAGE: top}
env:
  staging:
    vars: {STAGE: staging}
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(WORKER)
    (project / "ember.yaml").write_text(EMBER_YAML)
    (project / ".dev.vars").write_text("TOKEN=plain\n")
    (project / ".dev.vars.staging").write_text("TOKEN=staging-secret\n")
    return project


def test_dev_serves_the_environment_with_its_vars_and_dev_vars(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with DevProcess(project, "--env", "staging", state=tmp_path / "state") as dev:
        assert httpx.get(dev.url, timeout=10).text == "staging staging-secret"
        assert "ember dev: app-staging (worker.py)" in dev.lines
        dev.wait_for_line("Using environment 'staging'")
        assert any("env.TOKEN" in line and ".dev.vars.staging" in line for line in dev.lines)


def test_dev_takes_the_environment_from_cloudflare_env(tmp_path: Path) -> None:
    project = _project(tmp_path)
    environ = {"CLOUDFLARE_ENV": "staging"}
    with DevProcess(project, "-e", "", state=tmp_path / "s1", environ=environ) as dev:
        assert httpx.get(dev.url, timeout=10).text == "top plain"  # --env "" wins: top level
    with DevProcess(project, state=tmp_path / "s2", environ=environ) as dev:
        assert httpx.get(dev.url, timeout=10).text == "staging staging-secret"


def test_dev_refuses_an_environment_the_config_does_not_define(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "ember", "dev", str(project), "--port", "0", "--env", "qa"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    assert result.returncode == 1
    assert "ember.yaml: env: expected one of the environments the file defines: staging" in (
        result.stderr
    )
    assert "env: {qa: {}}" in result.stderr
