"""ember's own CLI against ember serve: deploy (temporary and logged in), kv, tail, crons,
deployments list, delete; every step checked at the worker's URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.serve.conftest import ServeProcess, permanent_account

ROOT = Path(__file__).resolve().parents[2]
EMBER_YAML = """\
name: clihello
main: src/entry.py
compatibility_date: "2026-11-01"
vars: {GREETING: hey}
kv_namespaces: [{binding: KV}]
# 30 February: the platform's scheduler never runs it by itself (*/30 did, at :30, between
# the KV put and get; midnight on 1 January would, for a test running then), only the
# explicit run below.
triggers: {crons: ["0 0 30 2 *"]}
"""
ENTRY = """\
from workers import Response

async def on_fetch(request, env):
    print("request to", request.url)
    return Response(f"{env.GREETING} {await env.KV.get('k')}")

async def on_scheduled(controller, env, ctx):
    await env.KV.put("k", "set by cron " + controller.cron)
"""


def _ember(serve: ServeProcess, home: Path, cwd: Path, *args: str, **kw: object):  # noqa: ANN202
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "EMBER_CREDENTIALS": str(home / "credentials.json"),
        "EMBER_PLATFORM": serve.url,
    }
    env |= kw.pop("env", {})  # type: ignore[arg-type]
    return subprocess.run(
        [sys.executable, "-m", "ember", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, **kw,
    )  # fmt: skip


def test_cli_deploy_kv_tail_cron_and_delete(serve: ServeProcess, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "ember.yaml").write_text(EMBER_YAML)
    (project / "src" / "entry.py").write_text(ENTRY)
    home = tmp_path / "home"

    deployed = _ember(serve, home, project, "deploy", "--temporary", "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert "'0 0 30 2 *' never fires: there is no 30 February" in deployed.stderr
    result = json.loads(deployed.stdout)
    account = result["account"]
    assert serve.worker(account, "clihello").text == "hey None"
    assert httpx_get(result["urls"][1]) == "hey None"  # the /w/<account>/<worker>/ URL

    put = _ember(serve, home, project, "kv", "key", "put", "k", "from cli", "--binding", "KV",
                "--remote")  # fmt: skip
    assert put.returncode == 0, put.stderr
    got = _ember(serve, home, project, "kv", "key", "get", "k", "--binding", "KV", "--remote")
    assert got.stdout == "from cli"
    assert serve.worker(account, "clihello").text == "hey from cli"

    tail = subprocess.Popen(
        [sys.executable, "-m", "ember", "tail", "--format", "json", "--max-events", "1"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT), "EMBER_PLATFORM": serve.url,
             "EMBER_CREDENTIALS": str(home / "credentials.json")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while tail.poll() is None:
        assert time.monotonic() < deadline
        serve.worker(account, "clihello", "/probe")
        time.sleep(0.5)
    out, err = tail.communicate()
    event = json.loads(out)
    assert event["event"]["request"]["url"].endswith("/probe"), err
    assert event["logs"][0]["message"][0].startswith("request to")

    # The cron from ember.yaml is the worker's schedule; run it now through the platform.
    with serve.api() as api:
        token = json.loads((home / "credentials.json").read_text())["temporary"][serve.url]
        schedules = api.get(
            f"/accounts/{result['account_id']}/workers/scripts/clihello/schedules",
            headers={"authorization": f"Bearer {token['token']}"},
        ).json()["result"]["schedules"]
        assert [s["cron"] for s in schedules] == ["0 0 30 2 *"]
        ran = api.post(
            f"/accounts/{result['account_id']}/workers/scripts/clihello/scheduled",
            json={"cron": "0 0 30 2 *"},
            headers={"authorization": f"Bearer {token['token']}"},
        )
        assert ran.json()["result"]["outcome"] == "ok"
    assert serve.worker(account, "clihello").text == "hey set by cron 0 0 30 2 *"

    listing = _ember(serve, home, project, "deployments", "list")
    assert f"http://clihello.{account}.localhost:" in listing.stderr  # ember's, off stdout
    deleted = _ember(serve, home, project, "delete", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert serve.worker(account, "clihello").status_code == 404


def test_cli_logged_in_deploy_reports_a_module_that_does_not_load(
    serve: ServeProcess, tmp_path: Path
) -> None:
    _, token = permanent_account(serve, "clibroken")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "ember.yaml").write_text(EMBER_YAML.replace("clihello", "clibad"))
    (project / "src" / "entry.py").write_text(ENTRY)
    env = {"env": {"EMBER_API_TOKEN": token}}
    assert _ember(serve, tmp_path / "h", project, "deploy", **env).returncode == 0
    (project / "src" / "entry.py").write_text("import not_a_module_anywhere\n")
    refused = _ember(serve, tmp_path / "h", project, "deploy", **env)
    assert refused.returncode == 1
    assert "failed to start" in refused.stderr and "not_a_module_anywhere" in refused.stderr
    assert serve.worker("clibroken", "clibad").text == "hey None"


def test_cli_secret_put_before_the_first_deploy_makes_a_draft_that_says_so(
    serve: ServeProcess, tmp_path: Path
) -> None:
    """``ember secret put`` for a worker that does not exist creates it (wrangler's question,
    answered yes in a script) with a placeholder that answers clearly until the code is
    deployed; the deploy keeps the secret."""
    _, token = permanent_account(serve, "clidraft")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "ember.yaml").write_text(EMBER_YAML.replace("clihello", "early"))
    (project / "src" / "entry.py").write_text(
        "from workers import Response\n\nasync def on_fetch(request, env):\n"
        "    return Response('token ' + env.TOKEN)\n"
    )
    env = {"env": {"EMBER_API_TOKEN": token}}
    put = _ember(serve, tmp_path / "h", project, "secret", "put", "TOKEN", input="t0k\n", **env)
    assert put.returncode == 0, put.stderr
    assert '🌀 Creating new Worker "early"...' in put.stdout, put.stdout
    draft = serve.worker("clidraft", "early")
    assert draft.status_code == 503, draft.text
    assert "has no code yet" in draft.text and "ember deploy" in draft.text
    assert _ember(serve, tmp_path / "h", project, "deploy", **env).returncode == 0
    assert serve.worker("clidraft", "early").text == "token t0k"


def httpx_get(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=30).text


def test_cli_kv_namespace_create_list_rename_delete(serve: ServeProcess, tmp_path: Path) -> None:
    """``ember kv namespace ...`` against a real platform: always remote, as in wrangler."""
    _, token = permanent_account(serve, "clins")
    env = {"env": {"EMBER_API_TOKEN": token}}
    home = tmp_path / "h"
    tmp_path.joinpath("p").mkdir()

    def ember(*args: str) -> str:
        done = _ember(serve, home, tmp_path / "p", "kv", "namespace", *args, **env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    # wrangler's lines, with the snippet in the project's config format (JSON without one).
    created = ember("create", "my-things")
    ns_id = json.loads(created.split("file:\n", 1)[1])["kv_namespaces"][0]["id"]
    assert created == (
        'Creating namespace with title "my-things"\nSuccess!\n'
        "To access your new KV Namespace in your Worker, add the following snippet to your "
        'configuration file:\n{\n  "kv_namespaces": [\n    {\n      "binding": "my_things",\n'
        f'      "id": "{ns_id}"\n    }}\n  ]\n}}\n'
    )
    tmp_path.joinpath("p", "wrangler.toml").write_text('name = "w"\n')
    toml = ember("create", "things")
    toml_id = toml.rsplit('id = "', 1)[1].split('"')[0]
    assert toml.endswith(f'file:\n[[kv_namespaces]]\nbinding = "things"\nid = "{toml_id}"\n')
    ember("delete", toml_id, "--yes")
    assert ember("rename", ns_id, "things") == f"Renamed KV namespace {ns_id} to 'things'\n"
    assert {"id": ns_id, "title": "things"} in json.loads(ember("list"))
    assert ember("rename", ns_id, "stuff") == f"Renamed KV namespace {ns_id} to 'stuff'\n"
    assert {"id": ns_id, "title": "stuff"} in json.loads(ember("list"))
    assert ember("delete", ns_id, "--yes") == f"Deleted KV namespace {ns_id}\n"
    assert ns_id not in {n["id"] for n in json.loads(ember("list"))}


def test_cli_ai_url_uses_the_saved_login_of_that_platform(
    serve: ServeProcess, tmp_path: Path
) -> None:
    """``ember ai run|models --url PLATFORM`` answers with the account ``ember login`` saved for
    that platform (ember serve's AI routes are per account, behind its token), not
    ``10000: Authentication error``."""
    _, token = permanent_account(serve, "cliai")
    home, cwd = tmp_path / "h", tmp_path
    bare = {k: v for k, v in os.environ.items() if k != "EMBER_AI_URL"}

    def ember(*args: str) -> subprocess.CompletedProcess[str]:
        return _ember(serve, home, cwd, "ai", *args, "--url", serve.url, env=bare)

    anonymous = ember("run", "@cf/ember/no-such-model", "hi")
    assert anonymous.returncode == 1 and "10000" in anonymous.stderr
    assert "ember login" in anonymous.stderr  # says how to get past it
    kept = {**bare, "EMBER_API_TOKEN": "ember_elsewhere", "EMBER_PLATFORM": "http://127.0.0.1:9"}
    elsewhere = _ember(serve, home, cwd, "ai", "run", "@cf/x/y", "hi", "--url", serve.url, env=kept)
    assert elsewhere.returncode == 1 and "10000" in elsewhere.stderr, elsewhere.stderr
    assert "EMBER_API_TOKEN is set but was not sent" in elsewhere.stderr, elsewhere.stderr
    unlisted = ember("models")  # the same 401 for the listing, not "expected ember's AI API"
    assert unlisted.returncode == 1 and "401" in unlisted.stderr, unlisted.stderr
    assert f"ember login --platform {serve.url}" in unlisted.stderr, unlisted.stderr
    assert _ember(serve, home, cwd, "login", "--token", token).returncode == 0
    refused = ember("run", "@cf/ember/no-such-model", "hi")
    assert refused.returncode == 1 and refused.stderr.strip().startswith("ember: error: 5007: ")
    listed = ember("models", "--json")
    assert listed.returncode == 0, listed.stderr
    assert isinstance(json.loads(listed.stdout), list)
