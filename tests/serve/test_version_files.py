"""Written-out version files of ``ember serve``: pruned with their versions, and orphans (a
crash between the commit that deleted a version and the removal of its files) removed when the
platform starts again."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account, put_worker, upload

WORKER = """\
from workers import Response

async def on_fetch(request, env):
    return Response("{answer}")
"""


def test_pruned_and_orphaned_version_files_are_removed(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG + "  versions_kept_per_worker: 2\n")
    try:
        account_id, token = permanent_account(serve, "acme")
        versions = tmp_path / "state" / "accounts" / account_id / "versions"
        with serve.api(token) as api:
            ids = []
            for answer in ("one", "two", "three"):
                put = put_worker(api, account_id, "w", WORKER.format(answer=answer))
                assert put.status_code == 200, put.text
                ids.append(put.json()["result"]["deployment_id"])
        assert serve.worker("acme", "w").text == "three"
        assert {p.name for p in versions.iterdir()} == set(ids[1:])  # the oldest pruned

        serve.kill9()
        orphan = versions / str(uuid.uuid4())  # deleted from the database, not yet from disk
        (orphan / "modules").mkdir(parents=True)
        (orphan / "modules" / "entry.py").write_text("print('orphan')\n")
        staging = versions / ".staging-crashed"  # a write-out cut short
        (staging / "modules").mkdir(parents=True)
        serve.start()

        assert {p.name for p in versions.iterdir()} == set(ids[1:])
        assert serve.worker("acme", "w").text == "three"
        assert "removed 2 version folder(s) a crash left behind" in serve.output()
    finally:
        serve.stop()


BROKEN = "raise RuntimeError('broken at import')\n"


def test_a_refused_upload_prunes_nothing(tmp_path: Path) -> None:
    """A version that does not start is discarded; the versions its upload would have pushed
    out of the window stay, rows and files: a run of refused uploads cannot wipe the rollback
    history. Both deploy paths: ``PUT .../scripts/{name}`` and ``POST .../versions``."""
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG + "  versions_kept_per_worker: 2\n")
    try:
        account_id, token = permanent_account(serve, "acme")
        versions = tmp_path / "state" / "accounts" / account_id / "versions"
        listing = f"/accounts/{account_id}/workers/scripts/w/versions"
        with serve.api(token) as api:
            ids = []
            for answer in ("one", "two"):
                put = put_worker(api, account_id, "w", WORKER.format(answer=answer))
                assert put.status_code == 200, put.text
                ids.append(put.json()["result"]["deployment_id"])
            for _ in range(3):
                refused = put_worker(api, account_id, "w", BROKEN)
                assert refused.status_code == 400, refused.text
                assert refused.json()["errors"][0]["code"] == 10021
                body, headers = upload(BROKEN)
                refused = api.post(
                    listing + "?bindings_inherit=strict", content=body, headers=headers
                )
                assert refused.status_code == 400, refused.text
                assert refused.json()["errors"][0]["code"] == 10021
            listed = [v["id"] for v in api.get(listing).json()["result"]["items"]]
        assert listed == list(reversed(ids))
        assert {p.name for p in versions.iterdir()} == set(ids)
        assert serve.worker("acme", "w").text == "two"
    finally:
        serve.stop()
