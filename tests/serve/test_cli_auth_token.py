"""An agent that deploys with ``ember deploy --temporary`` and then calls the platform's REST API
(or /ai/v1 with the openai client) gets the token from ``ember auth token`` (wrangler 4's
``wrangler auth token``), and reads ``whoami``, ``claim``, ``versions upload`` and ``accounts
create`` as JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.serve.conftest import ServeProcess

ROOT = Path(__file__).resolve().parents[2]


def _ember(serve: ServeProcess, home: Path, cwd: Path, *args: str) -> str:
    result = _run(serve, home, cwd, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _run(
    serve: ServeProcess, home: Path, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "EMBER_CREDENTIALS": str(home / "credentials.json"),
        "EMBER_PLATFORM": serve.url,
    }
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _verify(serve: ServeProcess, token: str, account_id: str) -> None:
    with serve.api(token) as client:
        assert client.get("/user/tokens/verify").status_code == 200
        assert client.get(f"/accounts/{account_id}").status_code == 200


def test_the_token_of_a_temporary_then_a_claimed_account(
    serve: ServeProcess, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (project / "ember.yaml").write_text("name: tok\nmain: worker.py\n")
    (project / "worker.py").write_text(
        "from workers import Response\n\nasync def on_fetch(request, env):\n"
        "    return Response('hi')\n"
    )
    deployed = json.loads(_ember(serve, home, project, "deploy", "--temporary", "--json"))

    bare = _ember(serve, home, project, "auth", "token")
    described = json.loads(_ember(serve, home, project, "auth", "token", "--json"))
    assert bare == described["token"] + "\n"
    assert described["type"] == "temporary" and described["account_name"] == deployed["account"]
    assert described["platform"] == serve.url and described["expires_at"] == deployed["expires_at"]
    _verify(serve, described["token"], described["account_id"])

    said = _run(serve, home, project, "whoami")
    assert said.returncode == 0 and deployed["claim_url"] in said.stdout, said.stderr
    assert "`ember whoami`" not in said.stderr  # no note sending whoami's user to whoami
    me = json.loads(_ember(serve, home, project, "whoami", "--json"))
    assert me["loggedIn"] is True and me["source"] == "temporary account"
    assert me["account"] == {
        "id": described["account_id"],
        "name": deployed["account"],
        "kind": "temporary",
    }
    assert me["temporary"]["claim_url"] == deployed["claim_url"]

    claimed = json.loads(_ember(serve, home, project, "claim", deployed["claim_url"], "--json"))
    assert claimed == {
        "account": {"id": described["account_id"], "name": deployed["account"]},
        "platform": serve.url,
    }
    after = json.loads(_ember(serve, home, project, "auth", "token", "--json"))
    assert after["type"] == "login" and after["expires_at"] is None
    _verify(serve, after["token"], after["account_id"])

    version = json.loads(_ember(serve, home, project, "versions", "upload", "--json"))
    with serve.api(after["token"]) as client:
        listed = client.get(f"/accounts/{after['account_id']}/workers/scripts/tok/versions")
    assert version["id"] in [v["id"] for v in listed.json()["result"]["items"]]


def test_accounts_create_as_json(serve: ServeProcess, tmp_path: Path) -> None:
    made = json.loads(
        _ember(serve, tmp_path, tmp_path, "accounts", "create", "agentops", "--json",
               "--state-dir", str(serve.state_dir))
    )  # fmt: skip
    assert made["name"] == "agentops" and made["platform"] == serve.url
    _verify(serve, made["token"], made["id"])
    assert httpx.get(serve.url + "/health", timeout=30).status_code == 200
