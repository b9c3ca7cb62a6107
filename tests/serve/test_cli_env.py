"""``--env NAME`` / ``CLOUDFLARE_ENV`` on the platform commands, against a real ``ember serve``:
each environment is its own worker, ``<name>-<env>``, with the environment's vars and bindings."""

from __future__ import annotations

import json
from pathlib import Path

from tests.serve.conftest import ServeProcess
from tests.serve.test_cli import _ember

WRANGLER_TOML = """\
name = "envhello"
main = "src/entry.py"
compatibility_date = "2026-11-01"
vars = { STAGE = "top" }
kv_namespaces = [{ binding = "KV" }]

[env.staging]
vars = { STAGE = "staging" }
kv_namespaces = [{ binding = "KV" }]

[env.bare]
"""
ENTRY = """\
from workers import Response

async def on_fetch(request, env):
    kv = await env.KV.get("k") if hasattr(env, "KV") else "no-kv"
    secret = getattr(env, "TOKEN", "no-secret")
    return Response(f"{env.STAGE if hasattr(env, 'STAGE') else 'no-vars'} {kv} {secret}")
"""


def test_each_environment_deploys_as_its_own_worker(serve: ServeProcess, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "wrangler.toml").write_text(WRANGLER_TOML)
    (project / "src" / "entry.py").write_text(ENTRY)
    home = tmp_path / "home"

    def ember(*args: str, ok: bool = True, stdin: str = "", **env: str):  # noqa: ANN202
        result = _ember(serve, home, project, *args, env=env, input=stdin)
        if ok:
            assert result.returncode == 0, result.stdout + result.stderr
        return result

    staging = ember("deploy", "--temporary", "--env", "staging", "--json")
    result = json.loads(staging.stdout)
    account = result["account"]
    assert result["name"] == "envhello-staging"
    assert serve.worker(account, "envhello-staging").text == "staging None no-secret"

    top = ember("deploy", "--temporary", "--json")  # no env: the top level, with wrangler's warning
    assert json.loads(top.stdout)["name"] == "envhello"
    assert "no target environment was specified" in top.stderr
    assert serve.worker(account, "envhello").text == "top None no-secret"

    # An environment without vars or bindings gets none, and says why.
    bare = ember("deploy", "--temporary", "-e", "bare")
    assert "Uploaded envhello-bare" in bare.stdout
    assert '"vars" exists at the top level, but not on "env.bare"' in bare.stderr
    assert serve.worker(account, "envhello-bare").text == "no-vars no-kv no-secret"

    # The environment variable selects too, and the flag wins over it; --env "" is the top level.
    ember(
        "kv",
        "key",
        "put",
        "k",
        "staging-value",
        "--binding",
        "KV",
        "--remote",
        CLOUDFLARE_ENV="staging",
    )
    ember(
        "kv",
        "key",
        "put",
        "k",
        "top-value",
        "--binding",
        "KV",
        "--remote",
        "--env",
        "",
        CLOUDFLARE_ENV="x",
    )
    ember("secret", "put", "TOKEN", "-e", "staging", stdin="s3cr3t\n")
    pretty = ("--format", "pretty")
    assert ember("secret", "list", *pretty, CLOUDFLARE_ENV="staging").stdout.strip() == (
        "Secret Name: TOKEN"
    )
    assert ember("secret", "list", *pretty).stdout.strip() == ""
    # secret with --name and --env names <name>-<env>, as wrangler's secret does.
    named = ember("secret", "list", "--name", "envhello", "--env", "staging").stdout
    assert json.loads(named) == [{"name": "TOKEN", "type": "secret_text"}]
    assert serve.worker(account, "envhello-staging").text == "staging staging-value s3cr3t"
    assert serve.worker(account, "envhello").text == "top top-value no-secret"
    assert "envhello-staging" in ember("deployments", "list", "--env", "staging").stderr

    unknown = ember("deploy", "--temporary", "--env", "qa", ok=False)
    assert unknown.returncode == 1 and "env: expected one of the environments" in unknown.stderr
    assert "staging, bare" in unknown.stderr and "[env.qa]" in unknown.stderr

    ember("delete", "--env", "staging", "--yes")
    assert serve.worker(account, "envhello-staging").status_code == 404
    assert serve.worker(account, "envhello").text == "top top-value no-secret"
