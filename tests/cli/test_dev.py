"""``ember dev`` end to end: serve, log, reload on save, survive broken code, stop on Ctrl-C."""

from __future__ import annotations

import datetime
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.cli.devprocess import ROOT, DevProcess, until

WORKER = """
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        print("handling", request.method)
        return Response("{body}")
"""


def _body(url: str) -> str:
    return httpx.get(url, timeout=10).text


def test_dev_serves_logs_reloads_and_recovers_from_a_syntax_error(tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(WORKER.format(body="first"))
    (project / "ember.yaml").write_text("name: app\nmain: worker.py\nvars:\n  GREETING: hi\n")
    (project / ".dev.vars").write_text("API_TOKEN=topsecret123\n")
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert _body(dev.url) == "first"
        dev.wait_for_line("handling GET")
        dev.wait_for_line("GET / 200")
        assert any("env.API_TOKEN" in line and "secret" in line for line in dev.lines)
        assert not any("topsecret123" in line for line in dev.lines)

        (project / "worker.py").write_text(WORKER.format(body="second"))
        until(lambda: _body(dev.url) == "second")

        (project / "worker.py").write_text("async def fetch(request, env, ctx)\n    pass\n")
        until(lambda: "SyntaxError" in _body(dev.url))
        page = httpx.get(dev.url, timeout=10)
        assert page.status_code == 500 and 'worker.py", line 1' in page.text
        assert "3.12" not in page.text  # a plain typo: no note about Python versions

        (project / "worker.py").write_text(WORKER.format(body="fixed"))
        until(lambda: _body(dev.url) == "fixed")

        (project / "ember.yaml").write_text("name: app\nmain: worker.py\nlimits: {cpu_ms: -1}\n")
        dev.wait_for_line("limits.cpu_ms")  # a broken config is reported...
        assert _body(dev.url) == "fixed"  # ...and the last good version keeps serving
        code = dev.stop()
    assert code == 0
    assert not any("Traceback" in line for line in dev.lines), dev.lines


def test_dev_with_a_missing_main_file_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / "ember.yaml").write_text("name: app\nmain: src/missing.py\n")
    result = subprocess.run(
        [sys.executable, "-m", "ember", "dev", str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert result.returncode == 1
    assert "ember: error:" in result.stderr and "main: expected an existing file" in result.stderr
    assert "src/missing.py" in result.stderr


def test_dev_refuses_every_unsupported_binding_at_start_in_one_message(tmp_path: Path) -> None:
    """A Worker Loader binding was warned "unexpected field (ignored)" and then failed on first
    use with AttributeError; and of several unsupported bindings only the first was named."""
    (tmp_path / "worker.py").write_text(WORKER.format(body="hi"))
    (tmp_path / "wrangler.jsonc").write_text(
        '{"name": "app", "main": "worker.py", "worker_loaders": [{"binding": "LOADER"}],'
        ' "r2_buckets": [{"binding": "R2"}], "d1_databases": [{"binding": "DB"}]}'
    )
    result = subprocess.run(
        [sys.executable, "-m", "ember", "dev", str(tmp_path), "--port", "0"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "ember: error:" in line]
    assert len(errors) == 1, result.stderr
    for key in ("worker_loaders", "r2_buckets", "d1_databases"):
        assert key in errors[0], errors[0]
    assert "expected supported binding types: ai, assets, kv_namespaces" in errors[0]
    assert "unexpected field" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", ["dev", "serve"])
def test_a_taken_port_is_one_line_as_in_wrangler(tmp_path: Path, command: str) -> None:
    (tmp_path / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    (tmp_path / "worker.py").write_text(WORKER.format(body="hi"))
    where = [str(tmp_path)] if command == "dev" else ["--state-dir", str(tmp_path / "state")]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "ember", command, *where, "--port", str(port)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
    assert result.returncode == 1, result.stderr
    line = (
        f"ember: error: Address already in use (127.0.0.1:{port}). Please check that you are "
        "not already running a server on this address or specify a different port with --port."
    )
    assert line in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    if command == "dev":  # one line and nothing else (README): no banner or State: line first
        assert (result.stdout, result.stderr) == ("", line + "\n")


def test_init_dates_the_project_in_utc(tmp_path: Path) -> None:
    """Uploads refuse a compatibility_date after today in UTC (10021, as workerd): ``ember
    init`` must not write a local date that is already tomorrow there. Run 14 hours ahead of
    UTC and 12 behind, at any hour one of the two local dates differs from UTC's."""
    # POSIX TZ strings (no tz database needed): "LOC-14" is 14 hours ahead of UTC.
    for name, offset in (("ahead", "LOC-14"), ("behind", "LOC+12")):
        before = datetime.datetime.now(datetime.UTC).date().isoformat()
        result = subprocess.run(
            [sys.executable, "-m", "ember", "init", name, "--dir", str(tmp_path)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TZ": offset},
            timeout=30,
        )
        after = datetime.datetime.now(datetime.UTC).date().isoformat()
        assert result.returncode == 0, result.stderr
        written = (tmp_path / name / "ember.yaml").read_text()
        dates = {f'compatibility_date: "{day}"' in written for day in (before, after)}
        assert True in dates, (offset, written)


def test_init_scaffolds_a_project_that_serves(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ember", "init", "my-worker", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    project = tmp_path / "my-worker"
    assert sorted(p.name for p in project.iterdir()) == [".gitignore", "ember.yaml", "worker.py"]
    assert ".ember/" in (project / ".gitignore").read_text()
    again = subprocess.run(
        [sys.executable, "-m", "ember", "init", "my-worker", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert again.returncode == 1 and "non-empty directory" in again.stderr
    with DevProcess(project, state=tmp_path / "state") as dev:
        assert _body(dev.url) == "Hello from my-worker!"


def test_dev_vars_from_the_command_line_as_wrangler_dev_takes_them(tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text(
        "from workers import Response\n\n"
        "async def on_fetch(request, env):\n"
        "    return Response(f'{env.GREETING} {env.A} {env.B}')\n"
    )
    (project / "ember.yaml").write_text("name: app\nmain: worker.py\nvars: {GREETING: hi}\n")
    # Several values after one --var (a yargs array in wrangler), the first ':' splitting each.
    with DevProcess(project, "--var", "A:1", "GREETING:http://x:1", "--var", "B:2") as dev:
        assert _body(dev.url) == "http://x:1 1 2"
        assert dev.stop() == 0


def test_dev_tracebacks_name_the_users_files_not_their_staged_copies(tmp_path: Path) -> None:
    """dev runs the worker from a staged copy of the modules a deploy uploads; its errors still
    point at the files the user edits (``src/helpers.py`` in the project)."""
    project = tmp_path / "app"
    (project / "src").mkdir(parents=True)
    (project / "src" / "helpers.py").write_text("def fail():\n    raise ValueError('boom')\n")
    (project / "src" / "entry.py").write_text(
        "from helpers import fail\n\nasync def on_fetch(request, env):\n    fail()\n"
    )
    (project / "ember.yaml").write_text("name: app\nmain: src/entry.py\n")
    with DevProcess(project, state=tmp_path / "state") as dev:
        page = httpx.get(dev.url, timeout=10)
        assert page.status_code == 500
        assert f'{project / "src" / "helpers.py"}", line 2' in page.text
        assert f'{project / "src" / "entry.py"}", line 4' in page.text
        dev.stop()


def test_dev_warns_when_requires_python_excludes_its_python(tmp_path: Path) -> None:
    """Python Workers run 3.12+; ember runs workers on its own interpreter. A project asking
    for a newer one is warned at start, and a SyntaxError names the interpreter."""
    project = tmp_path / "newer"
    project.mkdir()
    (project / "worker.py").write_text("def broken(:\n    pass\n")
    (project / "ember.yaml").write_text("name: newer\nmain: worker.py\n")
    newer = f"{sys.version_info.major}.{sys.version_info.minor + 1}"
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "newer"\nversion = "0"\nrequires-python = ">={newer}"\n'
    )
    running = ".".join(map(str, sys.version_info[:3]))
    with DevProcess(project, state=tmp_path / "state") as dev:
        page = httpx.get(dev.url, headers={"accept": "text/plain"}, timeout=10).text
    warning = next(line for line in dev.lines if "requires-python" in line)
    assert f"'>={newer}'" in warning and f"Python {running}" in warning, warning
    assert f"ember runs workers on Python {running}" in page, page
    assert ("Python 3.12" in page) is (sys.version_info < (3, 12)), page


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_dev_leaves_nothing_in_tmpdir_when_stopped(tmp_path: Path, sig: signal.Signals) -> None:
    """uvicorn exits on SIGTERM by re-raising it with the default handler, which skips atexit:
    the staged copy of the worker must go on the shutdown path, not in a finalizer."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "worker.py").write_text(WORKER.format(body="hi"))
    (tmp_path / "app" / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    dev = DevProcess(tmp_path / "app", state=tmp_path / "state", environ={"TMPDIR": str(tmpdir)})
    try:
        assert _body(dev.url) == "hi"
        assert any(p.name.startswith("ember-dev-") for p in tmpdir.iterdir())
        dev.process.send_signal(sig)
        dev.process.wait(30)
    finally:
        dev.stop()
    assert list(tmpdir.iterdir()) == []


def test_a_request_cut_by_ctrl_c_is_told_the_server_is_stopping(tmp_path: Path) -> None:
    """A request still running when ember dev stops (past its grace) gets a 503 that says the
    server is stopping, not only "Worker is not available." (as for a worker that failed)."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "worker.py").write_text(
        "import asyncio\nfrom workers import Response\n\n"
        "async def on_fetch(request, env):\n"
        "    print('handler started', flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "    return Response('late')\n"
    )
    (tmp_path / "app" / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    dev = DevProcess(tmp_path / "app", state=tmp_path / "state")
    answers: list[httpx.Response] = []
    try:
        asking = threading.Thread(target=lambda: answers.append(httpx.get(dev.url, timeout=60)))
        asking.start()
        dev.wait_for_line("handler started", timeout=30)
        dev.stop()
        asking.join(30)
    finally:
        dev.stop()
    (answer,) = answers
    assert answer.status_code == 503
    assert answer.text.strip() == "Worker is not available: the server is stopping."
    assert answer.headers["x-ember-error"] == "server_stopping"


def test_dev_removes_the_stage_a_killed_session_left_behind(tmp_path: Path) -> None:
    """A SIGKILLed ember dev cannot remove its staged copy of the worker: the next session
    removes it, and leaves alone a live session's stage and one with no owner record (an older
    ember's, or not ours)."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "worker.py").write_text(WORKER.format(body="hi"))
    (tmp_path / "app" / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    foreign = tmpdir / "ember-dev-older"
    foreign.mkdir()
    (foreign / "worker.py").write_text("")
    environ = {"TMPDIR": str(tmpdir)}
    killed = DevProcess(tmp_path / "app", state=tmp_path / "state", environ=environ)
    try:
        assert _body(killed.url) == "hi"
        killed.process.kill()
        killed.process.wait(30)
    finally:
        killed.stop()
    left = {p for p in tmpdir.iterdir() if p != foreign}
    assert len(left) == 1 and (next(iter(left)) / "code" / "worker.py").exists(), left
    with DevProcess(tmp_path / "app", state=tmp_path / "state2", environ=environ) as live:
        assert _body(live.url) == "hi"
        stages = set(tmpdir.iterdir())
        assert not (left & stages), "the killed session's stage is still there"
        assert foreign in stages and len(stages) == 2, stages
        # A second session while the first runs keeps the first one's stage.
        with DevProcess(tmp_path / "app", state=tmp_path / "state3", environ=environ) as other:
            assert _body(other.url) == "hi"
            assert stages <= set(tmpdir.iterdir())


def test_a_worker_that_failed_to_start_is_logged_like_any_request(tmp_path: Path) -> None:
    """The access log had no line for a request answered "Worker failed to start"."""
    project = tmp_path / "app"
    project.mkdir()
    (project / "worker.py").write_text("async def on_fetch(request, env)\n    pass\n")
    (project / "ember.yaml").write_text("name: app\nmain: worker.py\n")
    with DevProcess(project, state=tmp_path / "state") as dev:
        page = httpx.get(f"{dev.url}/first", timeout=10)
        assert page.status_code == 500 and "Worker failed to start" in page.text
        dev.wait_for_line(f"GET /first {page.status_code} (")
        assert httpx.get(f"{dev.url}/again", timeout=10).status_code == 500
        dev.wait_for_line(f"GET /again {page.status_code} (")
        assert dev.stop() == 0
