"""The real wrangler deploys a Python Worker with static assets to ``ember serve``: its
upload-session protocol (manifest, buckets, base64 upload with the session's token, the
completion token in the script's metadata) and the files served in front of the worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.platform.netns import unavailable_reason
from tests.platform.wrangler_scene import Scene, scene_in

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason())),
]

ASSETS = """
[assets]
directory = "./public"
binding = "ASSETS"
not_found_handling = "404-page"
"""


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    yield from scene_in(tmp_path)


def test_wrangler_deploys_assets(scene: Scene) -> None:
    plane = scene.plane()
    _, issued = plane.accounts.create_permanent("sites")
    plane.close()
    token = {"CLOUDFLARE_API_TOKEN": issued.token}
    toml = scene.project / "wrangler.toml"
    toml.write_text(toml.read_text() + ASSETS)
    public = scene.project / "public"
    (public / "docs").mkdir(parents=True)
    (public / "index.html").write_text("<p>home</p>")
    (public / "docs" / "index.html").write_text("docs")
    (public / "404.html").write_text("custom 404")
    (public / "logo.svg").write_text("<svg/>")
    # Configuration, not assets: wrangler sends their texts in the script's assets config.
    (public / "_redirects").write_text("/old /docs/ 301\n/alias /docs/ 200\n")
    (public / "_headers").write_text("/*\n  X-Frame-Options: DENY\n")

    code, out = scene.wrangler("deploy", **token)
    assert code == 0, out
    assert "Uploaded 4 files" in out or "4 new or modified static assets" in out, out
    host = "hello-py.sites.localhost"
    assert scene.request(host, "/") == (200, "<p>home</p>")
    assert scene.request(host, "/old")[0] == 301
    assert scene.request(host, "/alias") == (200, "docs")
    assert scene.request(host, "/_redirects")[1].startswith("v1 hello from vars")
    assert scene.request(host, "/docs/") == (200, "docs")
    assert scene.request(host, "/logo.svg") == (200, "<svg/>")
    status, body = scene.request(host, "/other")
    assert status == 200 and body.startswith("v1 hello from vars"), body  # the worker's

    # A second deploy sends no file the account already holds.
    scene.write_entry("v2")
    code, out = scene.wrangler("deploy", **token)
    assert code == 0 and "No updated asset files to upload" in out, out
    assert scene.request(host, "/")[1] == "<p>home</p>"
    assert scene.request(host, "/other")[1].startswith("v2 ")


def test_wrangler_deploys_an_assets_only_worker(scene: Scene) -> None:
    plane = scene.plane()
    _, issued = plane.accounts.create_permanent("static")
    plane.close()
    (scene.project / "wrangler.toml").write_text(
        'name = "docs"\ncompatibility_date = "2026-11-01"\n\n'
        '[assets]\ndirectory = "./public"\nhtml_handling = "drop-trailing-slash"\n'
    )
    (scene.project / "public" / "guide").mkdir(parents=True)
    (scene.project / "public" / "guide" / "index.html").write_text("guide")
    code, out = scene.wrangler("deploy", CLOUDFLARE_API_TOKEN=issued.token)
    assert code == 0, out
    host = "docs.static.localhost"
    assert scene.request(host, "/guide") == (200, "guide")
    assert scene.request(host, "/missing")[0] == 404
