"""A version's files on a disk with no room left (ENOSPC): ``StorageFull`` (the same error a
full SQLite store raises), no half-written copy left behind, and the failure recorded until a
write-out succeeds.

The disk is really full: the test runs the write-out in a user and mount namespace of its own
(``unshare -rm``, no root needed) over a 256 KiB tmpfs, so the kernel itself answers ENOSPC.
Where this host forbids unprivileged user namespaces the test is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRITE_OUT = """\
import json, sys
from pathlib import Path
from ember.runtime.deployments.files import AccountFiles
from ember.runtime.deployments.records import Module
from ember.storage import StorageFull

state = Path(sys.argv[1])
files = AccountFiles(state)
seen = {}
big = (Module("main.py", "text/x-python", b"#" * (1024 * 1024)),)
try:
    files.materialize("acct", "v1", "main.py", big)
    seen["raised"] = None
except StorageFull as exc:
    seen["raised"] = [type(exc).__name__, str(exc), exc.store, exc.cause]
seen["left"] = sorted(str(p.relative_to(state)) for p in state.rglob("*") if p.is_file())
seen["failing"] = [f.store for f in files.health.failures()]
small = (Module("main.py", "text/x-python", b"print('hi')"),)
files.materialize("acct", "v2", "main.py", small)
seen["after"] = [f.store for f in files.health.failures()]
print(json.dumps(seen))
"""


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="no unprivileged user namespaces here")
def test_script_files_on_a_full_disk_raise_storage_full(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    script = tmp_path / "write_out.py"
    script.write_text(WRITE_OUT)
    shell = (
        f'mount -t tmpfs -o size=256k tmpfs "{state}" && '
        f'exec "{sys.executable}" "{script}" "{state}"'
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", shell], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["raised"] == [
        "StorageFull",
        "the platform's storage is full: nothing was written; try again later",
        "worker files",
        "No space left on device",
    ], seen
    assert seen["left"] == [], seen  # no half-written copy
    assert seen["failing"] == ["worker files"] and seen["after"] == [], seen
    assert "storage full: a write to the worker files" in done.stderr  # the operator's line
