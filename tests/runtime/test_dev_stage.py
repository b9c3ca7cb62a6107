"""ember dev's stage records its owner so that only stages of sessions that died are removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember.runtime.dev_stage import DevStage, Owner, is_alive, process_start, remove_orphaned_stages


def test_a_recycled_pid_does_not_pass_for_the_owner() -> None:
    if not process_start(os.getpid()):
        pytest.skip("no /proc start times on this system")
    me = Owner(os.getpid(), process_start(os.getpid()))
    assert is_alive(me)
    assert not is_alive(Owner(me.pid, str(int(me.started) + 1)))


def test_only_stages_of_finished_sessions_go(tmp_path: Path) -> None:
    mine = DevStage.create(tmp_path)
    (mine.code / "worker.py").write_text("")
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = DevStage.create(tmp_path)
    (dead.root / "owner").write_text(Owner(int(child.stdout), "1").render())
    garbled = tmp_path / "ember-dev-garbled"
    garbled.mkdir()
    (garbled / "owner").write_text("not a pid\n")
    link = tmp_path / "ember-dev-link"
    link.symlink_to(dead.root)
    assert remove_orphaned_stages(tmp_path) == [dead.root]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [mine.root.name, garbled.name, link.name]
    )
    assert (mine.code / "worker.py").exists()
