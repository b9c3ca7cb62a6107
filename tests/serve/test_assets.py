"""Static assets deployed with ``ember deploy`` and served by ``ember serve``: the files go up
once per account (wrangler's upload-session protocol), each version keeps its own, a rollback
serves the old version's files, and ``env.ASSETS`` reads the deployed copy."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.serve.conftest import (
    ServeProcess,
    deploy_versions,
    permanent_account,
    temporary_account,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "name": "site",
    "main": "src/entry.py",
    "compatibility_date": "2025-06-01",
    "assets": {
        "directory": "./public",
        "binding": "ASSETS",
        "html_handling": "auto-trailing-slash",
        "run_worker_first": ["/api/*"],
    },
}
ENTRY = """\
from urllib.parse import urlparse
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        if path == "/api/page":
            page = await self.env.ASSETS.fetch("http://x/about")
            return Response("via binding: " + await page.text())
        if path == "/api/blog":  # the binding's redirect, returned as it is
            return await self.env.ASSETS.fetch("http://x/blog")
        return Response("worker " + path)
"""


def test_deploy_serves_assets_keeps_them_per_version_and_rolls_back(
    serve: ServeProcess, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "public" / "blog").mkdir(parents=True)
    (project / "wrangler.jsonc").write_text(json.dumps(CONFIG))
    (project / "src" / "entry.py").write_text(ENTRY)
    (project / "public" / "index.html").write_text("home v1")
    (project / "public" / "about.html").write_text("about")
    (project / "public" / "blog" / "index.html").write_text("blog")
    (project / "public" / "secret.txt").write_text("not uploaded")
    (project / "public" / ".assetsignore").write_text("secret.txt\n")
    account_id, token = permanent_account(serve, "assetco")
    first = serve.ember(token, project, "deploy", "--json")
    assert first.returncode == 0, first.stderr
    v1 = json.loads(first.stdout)["version_id"]

    page = serve.worker("assetco", "site", "/")
    assert page.text == "home v1" and page.headers["content-type"].startswith("text/html")
    etag = page.headers["etag"]
    assert serve.worker("assetco", "site", "/", headers={"if-none-match": etag}).status_code == 304
    redirect = serve.worker("assetco", "site", "/blog")
    assert redirect.status_code == 307 and redirect.headers["location"] == "/blog/"
    # By the shared path form, a redirect keeps the prefix the request came by.
    shared = httpx.get(f"{serve.url}/w/assetco/site/blog", timeout=60)
    assert shared.status_code == 307 and shared.headers["location"] == "/w/assetco/site/blog/"
    assert httpx.get(f"{serve.url}/w/assetco/site/blog/", timeout=60).status_code == 200
    about = httpx.get(f"{serve.url}/w/assetco/site/about.html?x=1", timeout=60)
    assert about.status_code == 307 and about.headers["location"] == "/w/assetco/site/about?x=1"
    # env.ASSETS.fetch's redirects too, as the assets in front of the worker answer them.
    bound = serve.worker("assetco", "site", "/api/blog")
    assert bound.status_code == 307 and bound.headers["location"] == "/blog/"
    shared = httpx.get(f"{serve.url}/w/assetco/site/api/blog", timeout=60)
    assert shared.status_code == 307 and shared.headers["location"] == "/w/assetco/site/blog/"
    assert serve.worker("assetco", "site", "/nothing").text == "worker /nothing"
    assert serve.worker("assetco", "site", "/api/page").text == "via binding: about"
    assert serve.worker("assetco", "site", "/secret.txt").text == "worker /secret.txt"

    (project / "public" / "index.html").write_text("home v2")
    second = serve.ember(token, project, "deploy", "--json")
    assert second.returncode == 0, second.stderr
    assert serve.worker("assetco", "site", "/").text == "home v2"
    with serve.api(token) as api:
        listed = api.get(f"/accounts/{account_id}/workers/scripts").json()["result"]
        assert [s["has_assets"] for s in listed if s["id"] == "site"] == [True]
        back = deploy_versions(api, account_id, "site", [(v1, 100)])
        assert back.status_code == 200, back.text
    assert serve.worker("assetco", "site", "/").text == "home v1"
    with serve.api(token) as api:
        secrets = f"/accounts/{account_id}/workers/scripts/site/secrets"
        put = api.put(secrets, json={"name": "S", "text": "x", "type": "secret_text"})
        assert put.status_code == 200, put.text  # a new version, derived: the same assets
    assert serve.worker("assetco", "site", "/").text == "home v1"
    assert serve.worker("assetco", "site", "/api/page").text == "via binding: about"


def test_upload_session_asks_only_for_files_the_account_lacks(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "bucketco")
    content = b"hello"
    manifest = {"/a.txt": {"hash": "0" * 32, "size": len(content)}}
    path = f"/accounts/{account_id}/workers/scripts/w/assets-upload-session"
    with serve.api(token) as api:
        started = api.post(path, json={"manifest": manifest}).json()["result"]
        assert started["buckets"] == [["0" * 32]]
        upload = f"/accounts/{account_id}/workers/assets/upload?base64=true"
        files = {"0" * 32: ("0" * 32, b"aGVsbG8=", "text/plain")}
        refused = api.post(upload, files=files)  # the API token is not the session's
        assert refused.status_code == 401
        done = api.post(upload, files=files, headers={"authorization": f"Bearer {started['jwt']}"})
        assert done.status_code == 201 and done.json()["result"]["jwt"]
        again = api.post(path, json={"manifest": manifest}).json()["result"]
        assert again["buckets"] == [] and again["jwt"]
        bad = api.post(path, json={"manifest": {"/../x": {"hash": "0" * 32, "size": 1}}})
        assert bad.status_code == 400


def test_a_temporary_account_uploads_at_most_1000_files_of_5_mib(serve: ServeProcess) -> None:
    account = temporary_account(serve)["account"]
    account_id, token = account["id"], account["apiToken"]  # type: ignore[index]
    path = f"/accounts/{account_id}/workers/scripts/w/assets-upload-session"
    many = {f"/f{i}.txt": {"hash": f"{i:032x}", "size": 1} for i in range(1001)}
    big = {"/big.bin": {"hash": "1" * 32, "size": 5 * 1024 * 1024 + 1}}
    with serve.api(token) as api:
        refused = api.post(path, json={"manifest": many})
        assert refused.status_code == 400 and "1,000 files" in refused.text
        refused = api.post(path, json={"manifest": big})
        assert refused.status_code == 400 and "5 MiB" in refused.text
        fine = api.post(path, json={"manifest": dict(list(many.items())[:1000])})
        assert fine.status_code == 200, fine.text


def test_an_assets_only_project_deploys_and_answers_every_request_from_its_files(
    serve: ServeProcess, tmp_path: Path
) -> None:
    project = tmp_path / "static"
    (project / "public").mkdir(parents=True)
    config = {
        "name": "static",
        "compatibility_date": "2025-06-01",
        "assets": {"directory": "public", "not_found_handling": "single-page-application"},
    }
    (project / "wrangler.jsonc").write_text(json.dumps(config))
    (project / "public" / "index.html").write_text("app shell")
    (project / "public" / "app.js").write_text("console.log(1)")
    account_id, token = permanent_account(serve, "staticco")
    deployed = serve.ember(token, project, "deploy", "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert json.loads(deployed.stdout)["modules"] == 0
    assert serve.worker("staticco", "static", "/").text == "app shell"
    script = serve.worker("staticco", "static", "/app.js")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert serve.worker("staticco", "static", "/some/route").text == "app shell"  # the SPA
    assert serve.worker("staticco", "static", "/", method="POST").status_code == 405
