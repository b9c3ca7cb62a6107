"""One ``ember serve`` per state directory: a second is refused, naming the first; a killed one
leaves no lock behind, even with its isolates' processes just started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.runtime.platform.state_lock import StateDirInUse, lock_state_dir
from tests.serve.conftest import ROOT, ServeProcess, answer, permanent_account, put_worker


def test_a_second_serve_on_the_same_state_is_refused_and_a_killed_one_leaves_no_lock(
    tmp_path: Path,
) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        account_id, token = permanent_account(serve, "locked")
        with serve.api(token) as api:
            assert put_worker(api, account_id, "app", answer("one")).status_code == 200
        assert serve.worker("locked", "app").status_code == 200  # an isolate is running
        second = subprocess.run(
            [sys.executable, "-m", "ember", "serve", "--port", "0", "--state-dir",
             str(tmp_path / "state"), "--config", str(serve.config)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        assert second.returncode != 0
        assert "in use by another ember serve" in second.stderr + second.stdout
        assert f"pid {serve.proc.pid}" in second.stderr + second.stdout  # type: ignore[union-attr]
        serve.kill9()
        serve.start()  # the kernel dropped the lock with the process
        assert serve.worker("locked", "app").status_code == 200
    finally:
        serve.stop()


def test_the_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    held = lock_state_dir(tmp_path / "state")
    with pytest.raises(StateDirInUse, match=rf"pid {os.getpid()}"):
        lock_state_dir(tmp_path / "state")
    held.release()
    lock_state_dir(tmp_path / "state").release()


def test_a_new_state_dir_is_private(tmp_path: Path) -> None:
    """Created 0700, as README's restore steps ask (it was 0755: the lock made it first)."""
    state = tmp_path / "share" / "ember" / "platform"
    held = lock_state_dir(state)
    try:
        assert state.stat().st_mode & 0o777 == 0o700
    finally:
        held.release()


def test_serve_warns_about_a_state_dir_others_can_read(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    serve = ServeProcess(state)
    try:
        assert "readable by other users" in serve.output() and "chmod 700" in serve.output()
    finally:
        serve.stop()
