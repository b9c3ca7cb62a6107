"""Written-out version files of ``ember serve``: pruned with their versions, and orphans (a
crash between the commit that deleted a version and the removal of its files) removed when the
platform starts again."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account, put_worker

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
