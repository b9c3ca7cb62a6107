"""Every command answers --help without error (click's advice for lazy groups)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from ember.cli.main import cli


def _all_commands() -> list[tuple[str, ...]]:
    ctx = click.Context(cli)
    paths: list[tuple[str, ...]] = [()]
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        paths.append((name,))
        if isinstance(command, click.Group):
            sub_ctx = click.Context(command)
            paths.extend((name, sub) for sub in command.list_commands(sub_ctx))
    return paths


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p) or "ember")
def test_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_deploy_help_names_no_fixed_claim_window() -> None:
    # The window is the platform's (platform.temporary.ttl), which the CLI cannot know here.
    result = CliRunner().invoke(cli, ["deploy", "--help"])
    assert "claimable for the platform's claim window" in " ".join(result.output.split())
    assert "60 minutes" not in result.output


def test_light_commands_import_neither_torch_nor_a_terminal_renderer() -> None:
    """``ember --help`` and the deploy path's start stay light (style R15): no torch, and not
    httpx's own command-line client, which pulls rich and pygments in (~80 ms a command)."""
    probe = (
        "import sys\n"
        "from ember.cli.main import main\n"
        "sys.argv = ['ember', 'deploy', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'rich', 'pygments', 'httpx') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines()[-1] == "['httpx']", done.stdout + done.stderr
