"""Static assets in a real ``ember dev``: Cloudflare's own Python template with assets, the
``env.ASSETS`` binding, an assets-only project, live edits, and paths that try to leave."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.cli.devprocess import DevProcess, until

# create-cloudflare's hello-world-with-assets Python template, as `npm create cloudflare` writes it.
C3_ASSETS = Path(__file__).parent / "c3_assets"
ENTRY = """
from urllib.parse import urlparse
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = urlparse(request.url).path
        if path == "/message":
            return Response("Hello, World!")
        if path == "/via-binding":
            answer = await self.env.ASSETS.fetch("http://any.host/about")
            kind = answer.headers.get("content-type")
            return Response(await answer.text(), headers={"x-type": kind})
        if path == "/binding-request":
            return await self.env.ASSETS.fetch(request)
        if path.startswith("/api/"):
            return Response("worker api " + path)
        return Response("Not Found", status=404)
"""


def _raw_get(url: str, path: str) -> tuple[int, bytes]:
    """A request line sent as written (an HTTP client would normalise ``..`` away)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _project(tmp_path: Path, assets: dict[str, object]) -> Path:
    project = tmp_path / "app"
    (project / "src").mkdir(parents=True)
    (project / "public" / "blog").mkdir(parents=True)
    (project / "src" / "entry.py").write_text(ENTRY)
    (project / "public" / "index.html").write_text("<h1>home</h1>")
    (project / "public" / "about.html").write_text("about")
    (project / "public" / "blog" / "index.html").write_text("blog")
    (project / "public" / "api").mkdir()
    (project / "public" / "api" / "x.txt").write_text("asset api")
    (tmp_path / "outside.txt").write_text("OUTSIDE")
    config = {
        "name": "site",
        "main": "src/entry.py",
        "compatibility_date": "2025-06-01",
        "compatibility_flags": ["python_workers"],
        "assets": assets,
    }
    (project / "wrangler.jsonc").write_text(json.dumps(config))
    return project


def test_the_c3_python_template_with_assets_starts_and_serves(tmp_path: Path) -> None:
    project = tmp_path / "c3-assets"
    shutil.copytree(C3_ASSETS, project)
    with DevProcess(project, state=tmp_path / "state") as dev:
        page = httpx.get(dev.url, timeout=10)
        assert page.status_code == 200 and "Fetch a random UUID" in page.text
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert httpx.get(dev.url + "/message", timeout=10).text == "Hello, World!"
        assert len(httpx.get(dev.url + "/random", timeout=10).text) == 36
        missing = httpx.get(dev.url + "/missing", timeout=10)
        assert missing.status_code == 404 and missing.text == "Not Found"  # the worker's
        (project / "public" / "index.html").write_text("edited")
        assert httpx.get(dev.url, timeout=10).text == "edited"  # read live, at once
        entry = project / "src" / "entry.py"
        entry.write_text(entry.read_text().replace("Hello, World!", "Hello again"))
        dev.wait_for_line("changed: reloading")
        until(lambda: httpx.get(dev.url + "/message", timeout=10).text == "Hello again")
        # An asset's edit restarts no worker: only the code's change was a reload.
        assert not any("index.html" in line for line in dev.lines if "reloading" in line)


def test_binding_routing_etags_and_traversal(tmp_path: Path) -> None:
    assets = {
        "directory": "./public",
        "binding": "ASSETS",
        "not_found_handling": "single-page-application",
        # Without its rule, /via-binding would get the SPA's index.html (a list of rules keeps
        # not_found_handling for every request, as on the platform).
        "run_worker_first": ["/api/*", "/via-binding", "/binding-request"],
    }
    project = _project(tmp_path, assets)
    with DevProcess(project, state=tmp_path / "state") as dev:
        via = httpx.get(dev.url + "/via-binding", timeout=10)
        assert via.text == "about" and via.headers["x-type"] == "text/html; charset=utf-8"
        assert httpx.get(dev.url + "/api/x.txt", timeout=10).text == "worker api /api/x.txt"
        assert httpx.get(dev.url + "/app/route", timeout=10).text == "<h1>home</h1>"
        spa = httpx.get(dev.url + "/binding-request", timeout=10)  # fetch(request): the SPA
        assert spa.status_code == 200 and spa.text == "<h1>home</h1>"
        about = httpx.get(dev.url + "/about", timeout=10)
        etag = about.headers["etag"]
        again = httpx.get(dev.url + "/about", headers={"if-none-match": etag}, timeout=10)
        assert again.status_code == 304 and again.content == b""
        redirect = httpx.get(dev.url + "/blog", timeout=10)
        assert redirect.status_code == 307 and redirect.headers["location"] == "/blog/"
        assert httpx.post(dev.url + "/about", timeout=10).status_code == 405
        head = httpx.head(dev.url + "/about", timeout=10)
        assert head.status_code == 200 and head.headers["content-length"] == "5"
        for path in ("/../outside.txt", "/%2e%2e/outside.txt", "/blog/%2E%2E/%2e%2e/outside.txt"):
            status, body = _raw_get(dev.url, path)
            assert b"OUTSIDE" not in body, path
        (project / "public" / "leak.txt").symlink_to(tmp_path / "outside.txt")
        assert b"OUTSIDE" not in _raw_get(dev.url, "/leak.txt")[1]


def test_an_assets_only_project(tmp_path: Path) -> None:
    project = _project(tmp_path, {"directory": "public", "not_found_handling": "404-page"})
    config = json.loads((project / "wrangler.jsonc").read_text())
    del config["main"]
    (project / "wrangler.jsonc").write_text(json.dumps(config))
    (project / "public" / "404.html").write_text("no such page")
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert dev.wait_for_line("assets only")
        assert httpx.get(dev.url + "/", timeout=10).text == "<h1>home</h1>"
        missing = httpx.get(dev.url + "/nothing/here", timeout=10)
        assert missing.status_code == 404 and missing.text == "no such page"
        (project / "public" / "404.html").unlink()
        gone = httpx.get(dev.url + "/nothing/here", timeout=10)
        assert gone.status_code == 404 and gone.content == b""
