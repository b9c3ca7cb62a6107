"""An older state directory on a disk without room for the one VACUUM that switches its files
to incremental auto-vacuum: ``ember serve`` still starts and serves (the rewrite is an
optimisation), says what it could not do and how much room it needs, and tries again at the next
start; the data is intact.

The disk is a 96 MiB tmpfs in a mount namespace of the test's own (``unshare``), holding the
state directory with 24 MiB of an older ember's KV data and a ballast file that leaves ~8 MiB
free: less than VACUUM's copy needs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.serve.test_storage_full_secrets import NAMESPACE, _namespaces_work

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = textwrap.dedent(
    """
    import os, sqlite3, sys
    from pathlib import Path
    from ember.runtime.deployments.clock import ManualClock
    from ember.runtime.deployments.plane import ControlPlane
    from tests.platform.test_store import CONFIG

    disk = Path(sys.argv[1])
    state = disk / "state"
    state.mkdir(mode=0o700)
    for name in ("platform.db", "kv.sqlite3"):
        with sqlite3.connect(state / name) as old:
            old.execute("PRAGMA journal_mode=WAL")
    with sqlite3.connect(state / "kv.sqlite3") as old:  # an older ember's data
        old.execute("CREATE TABLE filler (b BLOB)")
        old.executemany("INSERT INTO filler VALUES (?)", [(os.urandom(4096),) for _ in range(6000)])
        old.commit()
        old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    free = os.statvfs(disk)
    with open(disk / "ballast", "wb") as f:
        f.write(b"\\0" * (free.f_bavail * free.f_frsize - 8 * 1024 * 1024))
    plane = ControlPlane(state, CONFIG, clock=ManualClock())
    try:
        for note in plane.prepare_storage(say=lambda line: print("SAID", line)):
            print("NOTE", note)
        account, _ = plane.accounts.create_permanent("after")  # it serves: writes work
        print("CREATED", account.name)
    finally:
        plane.close()
    with sqlite3.connect(state / "kv.sqlite3") as check:
        print("ROWS", check.execute("SELECT COUNT(*) FROM filler").fetchone()[0])
    os.remove(disk / "ballast")
    plane = ControlPlane(state, CONFIG, clock=ManualClock())
    try:
        for note in plane.prepare_storage():
            print("AGAIN", note)
    finally:
        plane.close()
    """
)


@pytest.mark.skipif(not _namespaces_work(), reason="no mount namespace with a tmpfs here")
def test_serve_starts_on_an_old_state_dir_without_room_to_rewrite_it(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = 'mount -t tmpfs -o size=96m,mode=0700 tmpfs "$1" && exec "$2" -c "$3" "$1"'
    done = subprocess.run(
        [*NAMESPACE, "sh", "-c", mount, "sh", str(disk), sys.executable, SCRIPT],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    notes = [line for line in done.stdout.splitlines() if line.startswith("NOTE")]
    assert any("could not rewrite the KV store" in n and "bytes free" in n for n in notes), notes
    assert "CREATED after" in done.stdout
    assert "ROWS 6000" in done.stdout
    said = [line for line in done.stdout.splitlines() if line.startswith("SAID")]
    assert any("rewriting the KV store" in n and "MiB" in n for n in said), said
    again = [line for line in done.stdout.splitlines() if line.startswith("AGAIN")]
    assert any("KV store" in n and "auto_vacuum=INCREMENTAL" in n for n in again), again


def test_a_state_dir_from_a_newer_ember_is_refused_as_the_users_to_resolve(
    tmp_path: Path,
) -> None:
    """A downgrade: the files say a newer ember wrote them. A clear user error (not "possibly a
    bug") naming both versions and the ways out, and nothing written."""
    import sqlite3

    from ember.errors import StateTooNew, UserError
    from ember.runtime.deployments.clock import ManualClock
    from ember.runtime.deployments.plane import ControlPlane
    from tests.platform.test_store import CONFIG

    state = tmp_path / "state"
    ControlPlane(state, CONFIG, clock=ManualClock()).close()
    with sqlite3.connect(state / "platform.db") as db:
        db.execute("PRAGMA user_version = 99")
    before = (state / "platform.db").read_bytes()
    with pytest.raises(StateTooNew) as refused:
        ControlPlane(state, CONFIG, clock=ManualClock())
    assert isinstance(refused.value, UserError)
    message = str(refused.value)
    assert "schema version 99" in message and "newer ember" in message
    assert "docs/serve.md: 'Back up or move the state directory'" in message
    assert (state / "platform.db").read_bytes() == before
