"""``_redirects`` and ``_headers`` deployed with ``ember deploy`` (their texts in the script's
assets config, as wrangler sends them) and applied by ``ember serve``; ranges on a deployed
version's files; a platform that refuses what is not a file's text."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from ember.bindings.assets.files import file_hash
from ember.bindings.assets.rule_source import CompiledOnce
from ember.bindings.assets.rules import AssetRules, Redirect
from ember.bindings.registry import default_registry
from ember.runtime.platform.translate import build_slot
from tests.asset_projects import asset_project
from tests.serve.conftest import ServeProcess, permanent_account

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "name": "site",
    "main": "src/entry.py",
    "compatibility_date": "2025-06-01",
    "assets": {"directory": "./public", "binding": "ASSETS"},
}
ENTRY = """\
from urllib.parse import urlparse
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        if path == "/api/moved":
            moved = await self.env.ASSETS.fetch("http://x/old")
            return Response(f"{moved.status} {moved.headers.get('location')}")
        if path == "/api/long":
            long = await self.env.ASSETS.fetch("http://x/" + "a" * 16384)
            return Response(f"{long.status} {(await long.text())[:40]}")
        return Response("worker " + path)
"""
BIG = bytes(range(256)) * 2048


def test_deployed_rules_apply_per_version(serve: ServeProcess, tmp_path: Path) -> None:
    public = {
        "index.html": "home",
        "docs/page.html": "a doc",
        "big.bin": BIG,
        "_redirects": "/old /new 301\n/d/:name /docs/page 200\n/nope\n",
        "_headers": "/docs/*\n  X-Docs: :splat\n",
    }
    project = asset_project(tmp_path / "project", ENTRY, public, CONFIG)
    account_id, token = permanent_account(serve, "rulesco")
    first = serve.ember(token, project, "deploy", "--json")
    assert first.returncode == 0, first.stderr
    assert "public/_redirects:3" in first.stderr  # the skipped line, named at deploy

    moved = serve.worker("rulesco", "site", "/old")
    assert moved.status_code == 301 and moved.headers["location"] == "/new"
    rewritten = serve.worker("rulesco", "site", "/d/anything")
    assert rewritten.status_code == 200 and rewritten.text == "a doc"
    page = serve.worker("rulesco", "site", "/docs/page")
    assert page.text == "a doc" and page.headers["x-docs"] == "page"
    assert serve.worker("rulesco", "site", "/_redirects").text == "worker /_redirects"
    assert serve.worker("rulesco", "site", "/api/moved").text == "301 /new"
    # review18: a path over 16 KiB (the platform's URL limit) never reaches the rules.
    refused = serve.worker("rulesco", "site", "/" + "-" * 16384)
    assert refused.status_code == 414 and "414 Request-URI Too Large" in refused.text
    assert serve.worker("rulesco", "site", "/" + "-" * 16000).text == "worker /" + "-" * 16000
    long = serve.worker("rulesco", "site", "/api/long").text
    assert long == "414 <html>\r\n<head><title>414 Request-URI Too"
    part = serve.worker("rulesco", "site", "/big.bin", headers={"range": "bytes=1000-1999"})
    assert part.status_code == 206 and part.content == BIG[1000:2000]
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(BIG)}"

    # A new version's rules replace the old ones; without the files, no rules.
    (project / "public" / "_redirects").write_text("/old /newer 308\n")
    (project / "public" / "_headers").unlink()
    second = serve.ember(token, project, "deploy", "--json")
    assert second.returncode == 0, second.stderr
    moved = serve.worker("rulesco", "site", "/old")
    assert moved.status_code == 308 and moved.headers["location"] == "/newer"
    assert "x-docs" not in serve.worker("rulesco", "site", "/docs/page").headers
    assert serve.worker("rulesco", "site", "/d/x").text == "worker /d/x"

    with serve.api(token) as api:
        session = api.post(
            f"/accounts/{account_id}/workers/scripts/site/assets-upload-session",
            json={
                "manifest": {
                    "/a.txt": {"hash": file_hash(project / "public" / "index.html"), "size": 4}
                }
            },
        ).json()["result"]
        assert session["buckets"] == []  # held already: the token completes the upload
        metadata = {
            "main_module": "entry.py",
            "assets": {"jwt": session["jwt"], "config": {"_redirects": ["/a /b"]}},
        }
        refused = api.put(
            f"/accounts/{account_id}/workers/scripts/site",
            files={
                "metadata": (None, json.dumps(metadata), "application/json"),
                "entry.py": ("entry.py", ENTRY, "text/x-python"),
            },
        )
        assert refused.status_code == 400 and "_redirects" in refused.text, refused.text


def test_rule_files_past_16_kib_deploy_and_apply(serve: ServeProcess, tmp_path: Path) -> None:
    # review14: metadata.assets was capped at 16 KiB, so a _redirects past ~16 KB could not be
    # deployed (and the refusal never named it). This platform takes uploads up to 1 MiB.
    project = asset_project(tmp_path / "project", ENTRY, {"index.html": "home"}, CONFIG)
    pad = "x" * 200
    static = "".join(f"/s{i}/{pad} /t/{i} 301\n" for i in range(1999)) + "/old /new 301\n"
    dynamic = "".join(f"/d{i}/:name/{pad} /t/:name 302\n" for i in range(100))
    (project / "public" / "_redirects").write_text(static + dynamic)
    headers = "".join(f"/h{i}/*\n" + f"  X-Pad: {'v' * 400}\n" * 5 for i in range(98))
    headers += "/\n" + f"  X-Pad: {'v' * 400}\n" * 5 + "/*\n  X-Last: 1\n"
    (project / "public" / "_headers").write_text(headers)
    assert len(static + dynamic) > 400_000 and len(headers) > 200_000
    _, token = permanent_account(serve, "bigrules")
    deployed = serve.ember(token, project, "deploy", "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert "_redirects:" not in deployed.stderr and "_headers:" not in deployed.stderr
    moved = serve.worker("bigrules", "site", "/old")
    assert moved.status_code == 301 and moved.headers["location"] == "/new"
    found = serve.worker("bigrules", "site", f"/d99/abc/{pad}")
    assert found.status_code == 302 and found.headers["location"] == "/t/abc"
    page = serve.worker("bigrules", "site", "/")
    assert page.headers["x-pad"].startswith("vvv") and page.headers["x-last"] == "1"
    # The worker starts and env.ASSETS applies the same rules.
    assert serve.worker("bigrules", "site", "/api/moved").text == "301 /new"


def test_rules_compile_at_the_first_asset_request_after_a_restart(tmp_path: Path) -> None:
    # A restart loaded every version and compiled each one's rules before serving (~0.35 s a
    # version at the limits: minutes for hundreds). Loading a version now compiles nothing;
    # its first asset request does, once, on a thread.
    serve = ServeProcess(tmp_path / "state")
    try:
        public = {
            "index.html": "home",
            "_redirects": "/old /new 301\n",
            "_headers": "/*\n  X-Rule: yes\n",
        }
        project = asset_project(tmp_path / "project", ENTRY, public, CONFIG)
        account_id, token = permanent_account(serve, "lazyco")
        deployed = serve.ember(token, project, "deploy", "--json")
        assert deployed.returncode == 0, deployed.stderr
        serve.stop()
        serve.start()
        # env.ASSETS first, then the assets in front: both see the version's rules.
        assert serve.worker("lazyco", "site", "/api/moved").text == "301 /new"
        moved = serve.worker("lazyco", "site", "/old")
        assert moved.status_code == 301 and moved.headers["location"] == "/new"
        assert serve.worker("lazyco", "site", "/").headers["x-rule"] == "yes"
    finally:
        serve.stop()
    # What a start does for each live version, at its typed seam: the slot, and no compile.
    plane = serve.plane()
    account = plane.accounts.find(account_id)
    assert account is not None
    script = plane.scripts.get(account, "site")
    live = plane.scripts.live(account, "site")
    assert live is not None
    version = plane.scripts.version(account, "site", live.versions[0].version_id)
    slot = build_slot(plane, default_registry(), account, script, version)
    assert slot.assets is not None and isinstance(slot.assets.rules, CompiledOnce)
    rules = slot.assets.rules
    assert (rules.compiles, rules.now()) == (0, None)

    async def first_requests() -> list[AssetRules]:
        return await asyncio.gather(*(rules.get() for _ in range(8)))

    compiled = asyncio.run(first_requests())
    assert rules.compiles == 1 and all(found is compiled[0] for found in compiled)
    # On the platform's one compile thread, not the default executor's several.
    assert rules.compiled_on.startswith("asset-rules")
    assert compiled[0].redirect("/old") == Redirect(301, "/new")
    assert rules.now() is compiled[0]
