"""Module rules end to end: what a real ``ember serve`` deploy can read is what ``ember dev``
can read, and neither can read a file no rule uploads (``secrets.json``, ``key.pem``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.devprocess import DevProcess
from tests.serve.conftest import ServeProcess
from tests.serve.test_cli import _ember, httpx_get

WRANGLER_TOML = """\
name = "ruled"
main = "worker.py"
compatibility_date = "2026-11-01"
compatibility_flags = ["python_workers"]

[[rules]]
type = "Text"
globs = ["**/*.md"]
fallthrough = true
"""
WORKER = """\
import sys

from workers import Response

NAMES = ["notes.md", "data.txt", "templates/page.html", "blob.bin", "secrets.json", "key.pem"]


def read(name):
    try:
        with open(name, "rb") as f:
            return f.read().decode("latin-1").strip()
    except OSError:
        return "-"


async def on_fetch(request, env):
    seen = [f"{name}={read(name)}" for name in NAMES]
    sys.path.append("venv")
    try:
        import leak  # in venv/: never a module
        seen.append("leak=" + leak.VALUE)
    except ImportError:
        seen.append("leak=-")
    return Response(" ".join(seen))
"""
EXPECTED = (
    "notes.md=# notes data.txt=data templates/page.html=<p>page</p> blob.bin=\x01 "
    "secrets.json=- key.pem=- leak=-"
)


def _project(root: Path) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "venv").mkdir()
    (root / "wrangler.toml").write_text(WRANGLER_TOML)
    (root / "worker.py").write_text(WORKER)
    (root / "notes.md").write_text("# notes\n")
    (root / "data.txt").write_text("data\n")
    (root / "templates" / "page.html").write_text("<p>page</p>\n")
    (root / "blob.bin").write_bytes(b"\x01")
    (root / "secrets.json").write_text('{"token": "s3cret"}\n')
    (root / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (root / "venv" / "leak.py").write_text('VALUE = "leaked"\n')
    return root


def test_a_deployed_worker_reads_the_ruled_files_and_nothing_else(
    serve: ServeProcess, tmp_path: Path
) -> None:
    project = _project(tmp_path / "project")
    deployed = _ember(serve, tmp_path / "home", project, "deploy", "--temporary", "--json")
    assert deployed.returncode == 0, deployed.stderr
    result = json.loads(deployed.stdout)
    assert serve.worker(result["account"], "ruled").text == EXPECTED
    assert httpx_get(result["urls"][1]) == EXPECTED


def test_dev_reads_what_the_deploy_reads(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert httpx_get(dev.url) == EXPECTED
