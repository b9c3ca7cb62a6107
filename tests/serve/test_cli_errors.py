"""What an agent driving ember's CLI without a terminal (stdin /dev/null, stdout parsed) sees
when a command fails: exit 1 (2 for a command line that does not parse), one ``ember: error:``
line on stderr, and with ``--json`` one JSON object on stdout,
``{"error": {"code", "message", "kind"}}``, whose ``kind`` it can branch on. Each category is
reached through the real CLI against a real ``ember serve``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account

ROOT = Path(__file__).resolve().parents[2]
CONFIG = BASE_CONFIG + "  temporary: {max_workers: 1}\n"
NO_VERSION = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path_factory.mktemp("errors") / "state", CONFIG)
    yield process
    process.stop()


def _project(root: Path, name: str, extra: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "ember.yaml").write_text(f"name: {name}\nmain: worker.py\n{extra}")
    (root / "worker.py").write_text(
        "from workers import Response\n\nasync def on_fetch(request, env):\n"
        "    return Response('hi')\n"
    )
    return root


def _ember(home: Path, cwd: Path, platform: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "EMBER_CREDENTIALS": str(home / "credentials.json"),
        "EMBER_PLATFORM": platform,
    }
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _failed(result: subprocess.CompletedProcess[str], exit_code: int = 1) -> dict[str, object]:
    """The one JSON error object on stdout, after checking the exit code and the stderr line."""
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "ember: error: " in result.stderr, result.stderr
    error = json.loads(result.stdout)["error"]
    assert set(error) == {"code", "message", "kind"}, error
    assert error["message"] and error["message"] in result.stderr
    return error


def test_each_category_of_failure_is_one_json_object(serve: ServeProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = _project(tmp_path / "one", "one")

    not_logged_in = _failed(_ember(home, project, serve.url, "deployments", "list", "--json"))
    assert not_logged_in["kind"] == "auth" and not_logged_in["code"] is None
    assert "not logged in" in str(not_logged_in["message"])

    unparsed = _failed(_ember(home, project, serve.url, "deployments", "list", "--json", "-Z"), 2)
    assert unparsed["kind"] == "usage" and unparsed["code"] is None

    _, token = permanent_account(serve, "agent")
    assert _ember(home, project, serve.url, "login", "--token", token).returncode == 0
    missing = _ember(home, project, serve.url, "deployments", "list", "--name", "nosuch", "--json")
    assert _failed(missing) | {"message": ""} == {"code": 10007, "kind": "not_found", "message": ""}
    no_version = _ember(
        home, project, serve.url, "versions", "view", NO_VERSION, "--name", "nosuch", "--json"
    )
    assert _failed(no_version)["kind"] == "not_found"

    bad = _project(tmp_path / "bad", "bad", "limits: {cpu_ms: 0}\n")
    invalid = _failed(_ember(home, bad, serve.url, "deploy", "--dry-run", "--json"))
    assert invalid["kind"] == "config" and "cpu_ms" in str(invalid["message"])

    gone = _failed(
        _ember(home, project, serve.url, "deploy", "--temporary", "--json", "--platform",
               "http://127.0.0.1:9")
    )  # fmt: skip
    assert gone["kind"] == "unreachable" and "http://127.0.0.1:9" in str(gone["message"])

    ai = _failed(
        _ember(home, project, serve.url, "ai", "run", "@cf/ember/no-such-model", "hi", "--json",
               "--url", serve.url)
    )  # fmt: skip
    assert ai["code"] == 5007 and ai["kind"] == "not_found"
    assert str(ai["message"]).startswith("5007: ")


def test_a_temporary_accounts_quota_is_a_limit(serve: ServeProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _ember(
        home, _project(tmp_path / "a", "a"), serve.url, "deploy", "--temporary", "--json"
    )
    assert first.returncode == 0, first.stderr
    second = _ember(
        home, _project(tmp_path / "b", "b"), serve.url, "deploy", "--temporary", "--json"
    )
    quota = _failed(second)
    assert quota["code"] == 10037 and quota["kind"] == "limit"


def test_without_json_stdout_stays_empty(serve: ServeProcess, tmp_path: Path) -> None:
    result = _ember(tmp_path, tmp_path, serve.url, "deployments", "list", "--name", "x")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("ember: error: not logged in"), result.stderr
