"""Which environment a command uses: ``--env``/``-e``, else ``CLOUDFLARE_ENV``, and the worker
name each command derives from it (wrangler's ``getScriptName`` / ``getLegacyScriptName``)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ember.cli.deployments import worker_name
from ember.cli.environment import chosen_env, env_option


@click.command()
@env_option
@click.option("--name")
@click.option("--suffix-name", is_flag=True)
def probe(name: str | None, suffix_name: bool) -> None:
    click.echo(f"{chosen_env().name} {worker_name(name, suffix_name=suffix_name)}")


@pytest.mark.parametrize(
    ("args", "environ", "expected"),
    [
        ([], {}, "None shop"),
        (["--env", "staging"], {}, "staging shop-staging"),
        (["-e", "staging"], {}, "staging shop-staging"),
        ([], {"CLOUDFLARE_ENV": "staging"}, "staging shop-staging"),
        (["--env", ""], {"CLOUDFLARE_ENV": "staging"}, "None shop"),  # the flag wins
        (["--env", "staging", "--name", "w"], {}, "staging w"),  # deploy, delete: as given
        (["--env", "staging", "--name", "w", "--suffix-name"], {}, "staging w-staging"),
        # secret and tail suffix a --name only for --env, never for CLOUDFLARE_ENV
        (["--name", "w", "--suffix-name"], {"CLOUDFLARE_ENV": "staging"}, "staging w"),
    ],
)
def test_env_flag_variable_and_worker_name(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    environ: dict[str, str],
    expected: str,
) -> None:
    (tmp_path / "worker.py").write_text("")
    (tmp_path / "wrangler.toml").write_text('name = "shop"\nmain = "worker.py"\n[env.staging]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CLOUDFLARE_ENV", raising=False)
    result = CliRunner().invoke(probe, args, env=environ, catch_exceptions=False)
    assert result.output.strip() == expected


def test_ai_models_reads_the_environments_ai_section(tmp_path: Path) -> None:
    from ember.cli.main import cli

    (tmp_path / "worker.py").write_text("")
    (tmp_path / "ember.yaml").write_text(
        "name: aiapp\nmain: worker.py\nai: {binding: AI}\nenv:\n  staging:\n    ai:\n"
        '      binding: AI\n      models: {"@cf/zai-org/glm-4.7-flash": {replicas: 2}}\n'
    )

    def replicas(*args: str) -> int:
        result = CliRunner().invoke(
            cli,
            ["ai", "models", "--project", str(tmp_path), "--json", *args],
            env={"CLOUDFLARE_ENV": None},
        )
        rows = {row["id"]: row for row in json.loads(result.output)}
        return len(rows["@cf/zai-org/glm-4.7-flash"]["replicas"])

    assert (replicas(), replicas("--env", "staging")) == (1, 2)
