"""A platform nobody answers at: every command that talks to it says so in one line, naming
the URL and how it was chosen (--platform, $EMBER_PLATFORM, the default), before anything else
(no "not logged in", no proof-of-work)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from ember.cli.main import cli
from ember.errors import UserError

COMMANDS = [
    ["deploy", "{project}"],
    ["deploy", "{project}", "--temporary"],
    ["whoami"],
    ["tail", "hello"],
    ["secret", "list", "--name", "hello"],
    ["versions", "list", "--name", "hello"],
    ["deployments", "list", "--name", "hello"],
    ["deployments", "status", "--name", "hello"],
    ["kv", "namespace", "list"],
    ["kv", "key", "list", "--namespace-id", "abc", "--remote"],
    ["delete", "--name", "hello", "--yes"],
    ["rollback", "--name", "hello", "--yes"],
]


def _refused_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "hello"
    root.mkdir()
    (root / "ember.yaml").write_text("name: hello\nmain: worker.py\n")
    (root / "worker.py").write_text("from workers import Response\n")
    return root


def _run(args: list[str], tmp_path: Path, **env: str) -> str:
    environ = {k: None for k in os.environ if k.startswith("EMBER_")}
    environ |= {"EMBER_CREDENTIALS": str(tmp_path / "credentials.json"), **env}
    result = CliRunner().invoke(cli, args, env=environ)
    assert result.exit_code == 1, result.output
    # ember's entry point prints a UserError as one line; CliRunner hands it back instead.
    assert isinstance(result.exception, SystemExit | UserError), repr(result.exception)
    output = result.output + (str(result.exception) if result.exception else "")
    assert "Traceback" not in output
    assert "not logged in" not in output
    assert "proof-of-work" not in output
    return output


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:3]))
def test_each_command_names_the_url_and_where_it_came_from(
    command: list[str], project: Path, tmp_path: Path
) -> None:
    url = _refused_url()
    args = [part.format(project=project) for part in command]
    by_flag = _run([*args, "--platform", url], tmp_path)
    assert f"cannot reach the platform at {url}" in by_flag and "--platform" in by_flag
    by_env = _run(args, tmp_path, EMBER_PLATFORM=url)
    assert f"cannot reach the platform at {url}" in by_env and "$EMBER_PLATFORM" in by_env


def test_with_a_token_it_is_the_same_line(tmp_path: Path) -> None:
    url = _refused_url()
    output = _run(["whoami"], tmp_path, EMBER_PLATFORM=url, EMBER_API_TOKEN="token")
    assert f"cannot reach the platform at {url}" in output and "$EMBER_PLATFORM" in output
