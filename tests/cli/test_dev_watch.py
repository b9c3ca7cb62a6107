"""``ember dev`` reloads for the files a reload reads, and stops when told, whatever it waits on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
from click.testing import CliRunner

from ember.cli.main import cli
from tests.cli.devprocess import ROOT, DevProcess, until

WORKER = """
import asyncio

import helper
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.endswith("/hang"):
            print("hanging")
            await asyncio.sleep(3600)
        return Response(f"{helper.WORD} {getattr(self.env, 'TOKEN', 'none')}")
"""


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    (root / "worker.py").write_text(WORKER)
    (root / "helper.py").write_text('WORD = "one"\n')
    return root


def _ready_url(log: Path) -> str:
    def ready() -> bool:
        return "Ready on " in log.read_text()

    until(ready, timeout=30)
    line = next(line for line in log.read_text().splitlines() if "Ready on " in line)
    return line.split("Ready on ", 1)[1].strip()


def test_a_log_redirected_into_the_project_reloads_nothing(tmp_path: Path) -> None:
    """``ember dev > dev.log 2>&1`` in the project: each line written to dev.log is a write to
    a file no module rule picks, so it reloads nothing (it reloaded on every line, and requests
    waited for reloads that never settled). What a reload reads still reloads: a secrets file
    created, a module edited, a new module a rule picks."""
    project = _project(tmp_path / "app")
    log = project / "dev.log"
    command = [sys.executable, "-m", "ember", "dev", str(project), "--port", "0"]
    command += ["--persist-to", str(tmp_path / "state")]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        url = _ready_url(log)
        for _ in range(5):  # each answer writes a request line to dev.log
            assert httpx.get(url, timeout=10).text == "one none"
        (project / ".dev.vars").write_text("TOKEN=t1\n")
        assert httpx.get(url, timeout=10).text == "one t1"
        (project / "helper.py").write_text('WORD = "two"\n')
        assert httpx.get(url, timeout=10).text == "two t1"
        (project / "notes.md").write_text("no rule picks me")
        (project / "words.py").write_text('WORD = "three"\n')
        (project / "helper.py").write_text("from words import WORD\n")
        assert httpx.get(url, timeout=10).text == "three t1"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    reloads = [line for line in log.read_text().splitlines() if "changed: reloading" in line]
    assert reloads and not any("dev.log" in line or "notes.md" in line for line in reloads)


def test_a_rule_added_to_the_config_makes_its_files_modules_without_a_second_reload(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path / "app")
    (project / "words.md").write_text("markdown")
    (project / "helper.py").write_text(
        'import os\nWORD = "md" if os.path.exists(os.path.join(os.path.dirname(__file__),'
        ' "words.md")) else "no-md"\n'
    )
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert httpx.get(dev.url, timeout=10).text == "no-md none"
        config = project / "ember.yaml"
        config.write_text(config.read_text() + "rules:\n  - type: Text\n    globs: ['**/*.md']\n")
        assert httpx.get(dev.url, timeout=10).text == "md none"
        (project / "words.md").write_text("edited")  # a module now: its edit reloads
        dev.wait_for_line("words.md changed: reloading")
    reloads = [line for line in dev.lines if "changed: reloading" in line]
    # The config's reload staged words.md: it was not reloaded for again as "changed".
    assert reloads[0].startswith("[ember] ember.yaml changed"), reloads
    assert [line for line in reloads if "words.md" in line] == [reloads[-1]], reloads


def test_sigterm_stops_dev_while_a_request_never_finishes(tmp_path: Path) -> None:
    """uvicorn waits for every request in flight before it stops: a handler that never
    returns (or a request held for a reload that never settles) kept ember dev alive after
    SIGTERM for as long as the request's wall limit (5 minutes)."""
    project = _project(tmp_path / "app")
    dev = DevProcess(project, state=tmp_path / "state")
    answers: list[int] = []

    def call() -> None:
        try:
            answers.append(httpx.get(dev.url + "/hang", timeout=60).status_code)
        except httpx.HTTPError:
            answers.append(0)  # cut without an answer: an end too

    caller = threading.Thread(target=call, daemon=True)
    try:
        caller.start()
        dev.wait_for_line("hanging")
        dev.process.send_signal(signal.SIGTERM)
        dev.process.wait(60)  # (old code: TimeoutExpired, the request's wall limit is 5 min)
        caller.join(30)
    finally:
        dev.stop()
    assert answers, "the request in flight got no end"
    assert not any("Traceback" in line for line in dev.lines), "\n".join(dev.lines)


def test_a_linked_package_folder_is_run_watched_and_deployed(tmp_path: Path) -> None:
    """``ext -> ../outside/ext`` (a package shared between projects): dev imports it, an edit
    made through the link or at its target reloads, and a deploy uploads what dev ran. A
    same-size edit that keeps the mtime (``touch -r``) reloads too: it was never seen."""
    project = _project(tmp_path / "app")
    shared = tmp_path / "outside" / "ext"
    shared.mkdir(parents=True)
    (shared / "__init__.py").write_text("")
    (shared / "mod.py").write_text('WORD = "ext1"\n')
    (project / "ext").symlink_to("../outside/ext")
    (project / "helper.py").write_text("from ext.mod import WORD\n")
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert httpx.get(dev.url, timeout=10).text == "ext1 none"
        (shared / "mod.py").write_text('WORD = "ext2"\n')
        assert httpx.get(dev.url, timeout=10).text == "ext2 none"
        before = (shared / "mod.py").stat()
        (shared / "mod.py").write_text('WORD = "ext3"\n')
        os.utime(shared / "mod.py", ns=(before.st_atime_ns, before.st_mtime_ns))
        assert httpx.get(dev.url, timeout=10).text == "ext3 none"
    deploy = CliRunner().invoke(cli, ["deploy", str(project), "--dry-run", "--json"])
    assert deploy.exit_code == 0, deploy.output
    modules = json.loads(deploy.stdout)["modules"]
    assert modules == ["worker.py", "ext/__init__.py", "ext/mod.py", "helper.py"]
    # Named before the upload: they resolve outside the project.
    outside = [line for line in deploy.stderr.splitlines() if "outside the project" in line]
    assert [line.split()[1] for line in outside] == ["ext/__init__.py", "ext/mod.py"]
    assert str((shared / "mod.py").resolve()) in outside[1]


def test_dev_recovers_when_a_refused_link_below_the_root_is_removed(tmp_path: Path) -> None:
    """``src/pkg/up -> ../../..`` holds the project: the reload refuses it and keeps serving.
    While refused only the root was watched, so removing the link (an entry of src/pkg, a
    folder nobody watched) moved no watched mtime and dev served the old version until a
    restart; the refusal now names the folders walked, and dev watches them."""
    project = _project(tmp_path / "app")
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "pkg" / "mod.py").write_text("")
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert httpx.get(dev.url, timeout=10).text == "one none"
        (project / "helper.py").write_text('WORD = "two"\n')
        os.symlink("../../..", project / "src" / "pkg" / "up")
        assert httpx.get(dev.url, timeout=10).text == "one none"
        dev.wait_for_line("src/pkg/up -> ")
        (project / "src" / "pkg" / "up").unlink()
        assert httpx.get(dev.url, timeout=10).text == "two none"


def test_a_link_left_out_by_the_first_name_rule_is_named_in_dev_and_deploy(
    tmp_path: Path,
) -> None:
    """``alias -> src/pkg`` is left out (src/pkg is walked under its own name): ``import
    alias`` failed at runtime with no word of why. dev and deploy name it, and the name that
    holds its folder, on stderr."""
    project = _project(tmp_path / "app")
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "pkg" / "mod.py").write_text("")
    (project / "alias").symlink_to("src/pkg")
    line = "alias is a link to the folder walked as src/pkg: left out"
    with DevProcess(project, state=tmp_path / "state") as dev:
        dev.wait_for_line(line)
    deploy = CliRunner().invoke(cli, ["deploy", str(project), "--dry-run", "--json"])
    assert deploy.exit_code == 0, deploy.output
    assert [x for x in deploy.stderr.splitlines() if line in x] != []
    assert "alias/mod.py" not in json.loads(deploy.stdout)["modules"]
