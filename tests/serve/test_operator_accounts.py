"""``ember accounts create`` on the machine of a running ``ember serve``: the login line names
the URL that serve listens on, so the user's ``ember login`` reaches it on any port."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import ServeProcess

ROOT = Path(__file__).resolve().parents[2]


def test_the_login_line_names_the_running_platform(serve: ServeProcess) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    created = subprocess.run(
        [sys.executable, "-m", "ember", "accounts", "create", "opsacct", "--state-dir",
         str(serve.state_dir)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    token = created.stdout.split("API token (shown once): ")[1].split()[0]
    assert f"Log in with: ember login --platform {serve.url} --token {token}" in created.stdout
