"""``ember login`` without a terminal (an agent's stdin /dev/null) does not prompt: it fails at
once, naming the non-interactive ways the README documents (``--token``, ``EMBER_API_TOKEN``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_login_without_a_terminal_names_the_ways_that_need_none(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {"PYTHONPATH": str(ROOT), "EMBER_CREDENTIALS": str(tmp_path / "credentials.json")}
    result = subprocess.run(
        [sys.executable, "-m", "ember", "login", "--platform", "http://127.0.0.1:9"],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "API token:" not in result.stderr and "GetPassWarning" not in result.stderr
    assert result.stderr.startswith("ember: error: "), result.stderr
    assert "--token" in result.stderr and "EMBER_API_TOKEN" in result.stderr
    assert "cannot reach" not in result.stderr  # refused before anything is sent
    assert result.stdout == ""
    assert not (tmp_path / "credentials.json").exists()
