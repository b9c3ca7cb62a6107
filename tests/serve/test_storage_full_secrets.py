"""A secret change on a disk too full for the new version's files: all or nothing.

A secret change derives a new version (a copy of the live one with the secret changed) and
deploys it; ``ember serve`` writes that version's modules out to run it. When the disk has room
for the database row but not for the files, the 507 "nothing was written" must be true: the
secret, the versions and the deployments are as before, and the worker serves the old version.

How the disk is made full: ``ember serve`` runs in a mount namespace of its own (``unshare``)
whose ``accounts/`` (the written-out versions) is a small tmpfs; the test fills it through
``/proc/PID/root`` with a file until the kernel answers ENOSPC, and frees it by deleting that
file. The SQLite stores stay on the host's disk, so only the file write fails, as when a
version's files (thousands of modules) do not fit in the room a row still finds.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import ServeProcess, answer, permanent_account, put_worker

FULL = "the platform's storage is full: nothing was written; try again later"
# Root needs only a mount namespace; anyone else a user namespace too, keeping the current uid
# (a uid 0 inside would make the platform hand workers sandbox uids that are not mapped).
NAMESPACE = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-cm", "--keep-caps"]
MOUNT = 'mkdir -p "$1/accounts" && mount -t tmpfs -o size=512k,mode=0700 tmpfs "$1/accounts"'


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(
            [*NAMESPACE, "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _fill(accounts: Path) -> Path:
    """Fill the tmpfs at ``accounts`` (as the serve process sees it) until ENOSPC."""
    filler = accounts / "filler"
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def _state(serve: ServeProcess, token: str, account_id: str) -> tuple[object, ...]:
    """What a user can see of the worker: secrets, versions, deployments, the served answer."""
    script = f"/accounts/{account_id}/workers/scripts/app"
    with serve.api(token) as api:
        secrets = api.get(f"{script}/secrets").json()["result"]
        versions = [v["id"] for v in api.get(f"{script}/versions").json()["result"]["items"]]
        listed = api.get(f"{script}/deployments").json()["result"]["deployments"]
        deployments = [d["id"] for d in listed]
    return secrets, versions, deployments, serve.worker("full", "app").text


@pytest.mark.skipif(not _namespaces_work(), reason="no mount namespaces for this user here")
def test_a_secret_put_whose_files_do_not_fit_changes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    serve = ServeProcess(state)  # creates the state (and the account) outside the namespace
    serve.stop()
    account_id, token = permanent_account(serve, "full")
    serve.prefix = (*NAMESPACE, "sh", "-c", f'{MOUNT} && shift && exec "$@"', "sh", str(state))
    try:
        serve.start()
        assert serve.proc is not None
        accounts = Path(f"/proc/{serve.proc.pid}/root") / state.relative_to("/") / "accounts"
        with serve.api(token) as api:
            assert put_worker(api, account_id, "app", answer("v1")).status_code == 200
        before = _state(serve, token, account_id)
        assert before[0] == [] and before[3] == "v1 var=None kv=None secret=False", before

        filler = _fill(accounts)
        secret = {"name": "TOKEN", "text": "s3cret", "type": "secret_text"}
        with serve.api(token) as api:
            refused = api.put(f"/accounts/{account_id}/workers/scripts/app/secrets", json=secret)
        assert refused.status_code == 507, refused.text
        assert refused.json()["errors"][0]["message"] == FULL, refused.text
        assert _state(serve, token, account_id) == before
        written = sorted(p.name for p in (accounts / account_id / "versions").iterdir())
        assert written == before[1], written  # no directory of a version that is not there
        health = httpx.get(serve.url + "/health", timeout=30).json()
        assert [f["store"] for f in health["storage"]["failures"]] == ["worker files"], health
        assert serve.output().count("storage full:") == 1, serve.output()

        filler.unlink()  # space returns: the same put succeeds
        with serve.api(token) as api:
            stored = api.put(f"/accounts/{account_id}/workers/scripts/app/secrets", json=secret)
        assert stored.status_code == 200, stored.text
        secrets, versions, deployments, served = _state(serve, token, account_id)
        assert secrets == [{"name": "TOKEN", "type": "secret_text"}]
        assert len(versions) == 2 and len(deployments) == 2
        assert served == "v1 var=None kv=None secret=True"
        assert httpx.get(serve.url + "/health", timeout=30).json()["status"] == "ok"
        assert "Traceback" not in serve.output(), serve.output()
    finally:
        serve.stop()
