"""A static asset upload on a disk with no room left (ENOSPC): ``StorageFull`` (507, the same
error a version's files and a full SQLite store raise), no part-written file left behind, the
failure recorded for ``/health`` until a write succeeds, and the session still usable then.

The disk is really full: the test runs the control plane in a user and mount namespace of its
own (``unshare -rm``, no root needed) over a 2 MiB tmpfs, so the kernel itself answers ENOSPC
to a 4 MiB file. Where this host forbids unprivileged user namespaces the test is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UPLOAD = """\
import base64, json, sys
from pathlib import Path
from ember.runtime.deployments.plane import ControlPlane
from ember.storage import StorageFull

state = Path(sys.argv[1])
plane = ControlPlane(state)
account, _ = plane.accounts.create_permanent("acme")
big, small = b"x" * (4 * 1024 * 1024), b"small"
manifest = {"/big.bin": {"hash": "b" * 32, "size": len(big)},
            "/small.txt": {"hash": "c" * 32, "size": len(small)}}
jwt = plane.start_assets(account, {"manifest": manifest})["jwt"]
seen = {}
try:
    plane.assets.upload(account.id, jwt, {"b" * 32: base64.b64encode(big)})
    seen["raised"] = None
except StorageFull as exc:
    seen["raised"] = [type(exc).__name__, str(exc), exc.store, exc.cause, exc.http_status]
except OSError as exc:
    seen["raised"] = ["OSError", exc.strerror]
files = state / "accounts" / account.id / "assets" / "files"
seen["left"] = sorted(p.name for p in files.iterdir()) if files.is_dir() else []
seen["failing"] = [f.store for f in plane.storage.failures()]
# Room for the small file: the same session goes on, and the store is healthy again.
seen["small"] = plane.assets.upload(account.id, jwt, {"c" * 32: base64.b64encode(small)})
seen["after"] = [f.store for f in plane.storage.failures()]
plane.close()
print(json.dumps(seen))
"""


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _namespaces_work(), reason="no unprivileged user namespaces here")
def test_an_asset_upload_on_a_full_disk_raises_storage_full(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    script = tmp_path / "upload.py"
    script.write_text(UPLOAD)
    shell = (
        f'mount -t tmpfs -o size=2m tmpfs "{state}" && exec "{sys.executable}" "{script}" "{state}"'
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
        "static asset files",
        "No space left on device",
        507,
    ], seen
    assert seen["left"] == [], seen  # no part-written file
    assert seen["failing"] == ["static asset files"], seen
    assert seen["small"] is None and seen["after"] == [], seen  # big.bin is still to come
    assert "storage full: a write to the static asset files" in done.stderr  # operator's line
