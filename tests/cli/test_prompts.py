"""Questions as wrangler's ``confirm`` asks them: answered at a terminal, the fallback (yes)
printed and used where nothing can be asked."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from ember.cli import prompts


@click.command()
@click.option("--fallback/--no-fallback", default=True)
def ask(fallback: bool) -> None:
    click.echo("went on" if prompts.confirm("Delete it?", fallback=fallback) else "stopped")


def test_without_a_terminal_the_fallback_is_used_and_said() -> None:
    result = CliRunner().invoke(ask, [], input="n\n")  # a pipe is not read as an answer
    assert result.output == (
        "? Delete it?\n🤖 Using fallback value in non-interactive context: yes\nwent on\n"
    )
    refused = CliRunner().invoke(ask, ["--no-fallback"], input="y\n")
    assert refused.output.endswith("context: no\nstopped\n")


@pytest.mark.parametrize(
    ("ci", "expected"), [("true", True), ("1", True), ("0", False), ("", False)]
)
def test_ci_counts_as_non_interactive(
    monkeypatch: pytest.MonkeyPatch, ci: str, expected: bool
) -> None:
    monkeypatch.setattr(prompts.sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(prompts.sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("CI", ci)
    assert prompts.non_interactive() is expected
