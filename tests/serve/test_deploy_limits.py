"""A project's ``limits`` travel with ``ember deploy`` / ``versions upload`` as wrangler sends
them (``metadata.limits``: ``cpu_ms``, ``subrequests``), and ``ember serve`` enforces them on the
deployed worker as ``ember dev`` does; each version keeps its own (a rollback restores them), and
a limit past the account's tier is refused at upload with Cloudflare's code."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from tests.serve.conftest import ServeProcess, permanent_account, put_worker
from tests.serve.test_cli import _ember

ENTRY = """\
import time
from workers import Response

async def on_fetch(request, env):
    if request.url.endswith("/spin"):
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return Response("spun")
    return Response("ok")
"""


def _project(root: Path, name: str, limits: str) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    config = f'name: {name}\nmain: src/entry.py\ncompatibility_date: "2026-11-01"\n{limits}'
    (root / "ember.yaml").write_text(config)
    (root / "src" / "entry.py").write_text(ENTRY)
    return root


def _run(serve: ServeProcess, root: Path, token: str | None, *args: str) -> Any:
    env = {"EMBER_API_TOKEN": token} if token else {}
    return _ember(serve, root / "home", root, *args, env=env)


def test_deployed_limits_are_enforced_and_kept_per_version(
    serve: ServeProcess, tmp_path: Path
) -> None:
    name = "limited-" + secrets.token_hex(3)
    account_id, token = permanent_account(serve, name)
    root = _project(tmp_path / "p", "spin", "limits: {cpu_ms: 50, memory_mb: 128}\n")

    dry = _run(serve, root, token, "deploy", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Limits: cpu_ms=50" in dry.stdout.splitlines()
    # memory_mb is ember dev's own: not uploaded, and the deploy says so.
    assert "limits.memory_mb" in dry.stderr and "not uploaded" in dry.stderr
    summary = json.loads(_run(serve, root, token, "deploy", "--dry-run", "--json").stdout)
    assert summary["limits"] == {"cpu_ms": 50}

    first = _run(serve, root, token, "deploy", "--json")
    assert first.returncode == 0, first.stderr
    v1 = json.loads(first.stdout)["version_id"]
    spun = serve.worker(name, "spin", "/spin")
    assert spun.status_code == 503 and "exceeded CPU time limit" in spun.text, spun.text
    assert "1102" in spun.text
    assert serve.worker(name, "spin").text == "ok"
    with serve.api(token) as api:
        version = api.get(f"/accounts/{account_id}/workers/scripts/spin/versions/{v1}").json()
    assert version["result"]["resources"]["script_runtime"]["limits"] == {"cpu_ms": 50}

    # Without limits the next version runs under the platform's defaults (30 s of CPU) ...
    _project(root, "spin", "")
    assert _run(serve, root, token, "deploy").returncode == 0
    assert serve.worker(name, "spin", "/spin").text == "spun"
    # ... and a rollback brings back the first version with its own limit.
    back = _run(serve, root, token, "rollback", v1, "--yes", "--message", "cpu")
    assert back.returncode == 0, back.stderr
    assert serve.worker(name, "spin", "/spin").status_code == 503

    # versions upload carries them too.
    _project(root, "spin", "limits: {cpu_ms: 70, subrequests: 20}\n")
    uploaded = _run(serve, root, token, "versions", "upload")
    assert uploaded.returncode == 0, uploaded.stderr
    v3 = uploaded.stdout.split("Worker Version ID: ")[1].split()[0]
    with serve.api(token) as api:
        version = api.get(f"/accounts/{account_id}/workers/scripts/spin/versions/{v3}").json()
    limits = version["result"]["resources"]["script_runtime"]["limits"]
    assert limits == {"cpu_ms": 70, "subrequests": 20}


def test_limits_past_the_tier_are_refused_at_upload(serve: ServeProcess, tmp_path: Path) -> None:
    # A temporary account's tier allows 50 ms of CPU (platform.temporary.cpu_ms_per_request).
    root = _project(tmp_path / "t", "tmpspin", "limits: {cpu_ms: 60000}\n")
    refused = _run(serve, root, None, "deploy", "--temporary")
    assert refused.returncode != 0
    assert "limits.cpu_ms" in refused.stderr and "[code: 100328]" in refused.stderr
    assert "50" in refused.stderr

    account_id, token = permanent_account(serve, "tier-" + secrets.token_hex(3))
    with serve.api(token) as api:
        over = put_worker(api, account_id, "over", ENTRY, limits={"cpu_ms": 300_001})
        assert over.status_code == 400
        error = over.json()["errors"][0]
        assert error["code"] == 100328 and "limits.cpu_ms" in error["message"]
        assert "300000" in error["message"]
        bad = put_worker(api, account_id, "bad", ENTRY, limits={"cpu_ms": "fast"})
        assert bad.status_code == 400 and bad.json()["errors"][0]["code"] == 10021
        assert "limits.cpu_ms" in bad.json()["errors"][0]["message"]
        most = put_worker(api, account_id, "most", ENTRY, limits={"cpu_ms": 300_000})
        assert most.status_code == 200, most.text
        assert api.get(f"/accounts/{account_id}/workers/scripts/over").status_code == 404
