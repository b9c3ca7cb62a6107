"""ember's own CLI against a real platform (uvicorn on loopback), as subprocesses."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.platform.conftest import TEST_CONFIG, RunningPlatform, start_platform
from tests.platform.helpers import temporary_account

ROOT = Path(__file__).resolve().parents[2]
WRANGLER_TOML = """\
name = "hello"
main = "src/entry.py"
compatibility_date = "2026-11-01"

[vars]
GREETING = "hi"

[[kv_namespaces]]
binding = "KV"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "wrangler.toml").write_text(WRANGLER_TOML)
    (root / "src" / "entry.py").write_text("from helper import X\n")
    (root / "src" / "helper.py").write_text("X = 1\n")
    (root / "src" / "page.html").write_text("<p>hi</p>")
    (root / "python_modules" / "vend").mkdir(parents=True)
    (root / "python_modules" / "vend" / "__init__.py").write_text("V = 2\n")
    return root


class Ember:
    def __init__(self, platform: RunningPlatform, home: Path, cwd: Path) -> None:
        self.credentials = home / "config" / "ember" / "credentials.json"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
        self.env |= {
            "PYTHONPATH": str(ROOT),
            "EMBER_CREDENTIALS": str(self.credentials),
            "EMBER_PLATFORM": platform.url,
            "HOME": str(home),
        }
        self.cwd = cwd

    def __call__(
        self, *args: str, stdin: str = "", ok: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "ember", *args],
            cwd=self.cwd,
            env={**self.env, **env},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if ok:
            assert result.returncode == 0, result.stdout + result.stderr
        return result


@pytest.fixture
def ember(platform: RunningPlatform, tmp_path: Path, project: Path) -> Ember:
    return Ember(platform, tmp_path / "home", project)


def test_temporary_deploy_reuse_claim(platform: RunningPlatform, ember: Ember) -> None:
    first = ember("deploy", "--temporary", "--json")
    result = json.loads(first.stdout)
    assert {"url", "claim_url", "claim_command", "expires_at"} <= set(result)
    assert "Temporary account ready:" in first.stderr and "(created)" in first.stderr
    assert "Claim within: 60 minutes" in first.stderr
    assert f"Claim URL: {result['claim_url']}" in first.stderr
    assert result["url"].startswith(f"http://hello.{result['account']}.localhost:")
    assert stat.S_IMODE(ember.credentials.stat().st_mode) == 0o600

    account = platform.plane.accounts.find(result["account"])
    version = platform.plane.scripts.version(account, "hello", result["version_id"])
    modules = {m.name: m.content_type for m in platform.plane.scripts.modules(version.id)}
    assert modules == {
        "entry.py": "text/x-python",
        "helper.py": "text/x-python",
        "page.html": "text/plain",
        "python_modules/vend/__init__.py": "application/octet-stream",
    }
    assert [n.title for n in platform.plane.namespaces.list(account)] == ["hello-kv"]

    second = ember("deploy", "--temporary")
    assert "(reused)" in second.stdout and f"/w/{result['account']}/hello/" in second.stdout
    assert len(platform.plane.scripts.versions(account, "hello")) == 2
    assert "temporary" in ember("whoami").stdout

    refused = ember("deploy", "--temporary", ok=False, EMBER_API_TOKEN="ember_x")
    assert refused.returncode == 1 and "can't be used" in refused.stderr

    claim_args = result["claim_command"].split()[1:]
    claimed = ember(*claim_args)
    assert "permanent" in claimed.stdout
    who = ember("whoami").stdout
    assert "permanent" in who and "saved login" in who
    refused = ember("deploy", "--temporary", ok=False)
    assert "logged in as account" in refused.stderr
    ember("deploy")  # the claimed account keeps working with the saved login
    assert platform.plane.accounts.find(result["account"]).kind == "permanent"


def test_login_deploy_secrets_deployments_rollback_delete(
    platform: RunningPlatform, ember: Ember
) -> None:
    _, issued = platform.plane.accounts.create_permanent("acme")
    wrong = ember("login", "--token", "ember_wrong", ok=False)
    assert wrong.returncode == 1 and "[code: 10000]" in wrong.stderr
    assert "acme" in ember("login", "--token", issued.token).stdout

    first = ember("deploy").stdout
    # the lines of wrangler deploy, in its order, that scripts parse
    assert re.search(
        r"^Uploaded hello \(.*\)\nDeployed hello triggers\n  http://hello\.acme\.localhost:\d+/\n"
        r"(  .*\n)*Current Version ID: ([0-9a-f-]{36})$",
        first,
        re.MULTILINE,
    ), first
    version_line = first.strip().splitlines()[-1]
    account = platform.plane.accounts.find("acme")
    assert account is not None
    live = platform.plane.scripts.live(account, "hello").versions[0].version_id
    assert version_line == f"Current Version ID: {live}"
    ember("secret", "put", "API_KEY", stdin="s3cr3t\n")
    assert json.loads(ember("secret", "list").stdout) == [
        {"name": "API_KEY", "type": "secret_text"}
    ]
    ember("deploy", "--message", "second")
    listing = ember("deployments", "list").stdout
    # The first deploy is a Scripts PUT ("upload"); a later one uploads a version, then POSTs a
    # deployment ("deployment"), as Cloudflare tags them. Oldest first, as wrangler lists them.
    sources = re.findall(r"^Source:\s+(.+)$", listing, re.MULTILINE)
    assert sources == ["Upload", "Secret Change", "Deployment"], listing
    assert "\nMessage:     second\n" in listing

    account = platform.plane.accounts.find("acme")
    v3, v2, v1 = (v.id for v in platform.plane.scripts.versions(account, "hello"))
    rolled = ember("rollback", "--message", "undo").stdout  # to the previous: v2
    assert rolled.endswith(f"Current Version ID: {v2}\n"), rolled
    live = platform.plane.scripts.live(account, "hello")
    assert live.versions[0].version_id == v2
    assert live.annotations == {
        "workers/triggered_by": "rollback",
        "workers/message": "undo",
        "workers/rollback_from": live.annotations["workers/rollback_from"],
    }
    back = ember("rollback", v1, ok=False, stdin="n\n")  # v1 predates the secret
    assert "[code: 10220]" in back.stderr and back.returncode != 0
    assert platform.plane.scripts.live(account, "hello").versions[0].version_id == v2
    ember("rollback", v1, "--yes")
    assert platform.plane.scripts.live(account, "hello").versions[0].version_id == v1

    gone = ember("secret", "delete", "API_KEY", ok=False)  # v1 never had it
    assert "no secret named 'API_KEY' [code: 10056]" in gone.stderr
    ember("secret", "put", "API_KEY", stdin="again")
    ember("secret", "delete", "API_KEY")
    assert json.loads(ember("secret", "list").stdout) == []
    ember("delete", "--yes")
    assert platform.plane.scripts.list(account) == []
    assert "Removed the saved login" in ember("logout").stdout
    missing = ember("whoami", ok=False)
    assert "not logged in" in missing.stderr


def test_unreachable_platform_and_bad_project(ember: Ember, tmp_path: Path) -> None:
    down = ember("whoami", ok=False, EMBER_API_TOKEN="x", EMBER_PLATFORM="http://127.0.0.1:9")
    assert "cannot reach the platform at http://127.0.0.1:9 (from $EMBER_PLATFORM)" in down.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = ember("deploy", str(empty), "--temporary", ok=False)
    assert "wrangler.toml" in bad.stderr and bad.returncode == 1


def test_operator_creates_an_account_then_the_user_logs_in(
    platform: RunningPlatform, ember: Ember
) -> None:
    created = ember("accounts", "create", "ops-made", "--state-dir", str(platform.plane.state_dir))
    token = created.stdout.split("API token (shown once): ")[1].split()[0]
    # No ember serve ever ran on this state directory: the URL is a placeholder, explained.
    assert f"Log in with: ember login --platform URL --token {token}" in created.stdout
    assert "URL: where ember serve listens" in created.stdout
    temporary = temporary_account(platform)["account"]["name"]  # type: ignore[index]
    listed = ember("accounts", "list", "--state-dir", str(platform.plane.state_dir)).stdout
    assert "ops-made" in listed
    # A temporary account's expiry in UTC, and the time left (not a raw epoch).
    expiry = rf"{temporary}  temporary  expires \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert re.search(rf"{expiry} \(in (59|60) minutes\)", listed), listed
    assert "ops-made" in ember("login", "--token", token).stdout
    taken = ember(
        "accounts", "create", "ops-made", "--state-dir", str(platform.plane.state_dir), ok=False
    )
    assert "already exists" in taken.stderr


def test_deploy_says_the_ai_models_mapping_stays_behind(
    platform: RunningPlatform, ember: Ember, project: Path
) -> None:
    config = project / "wrangler.toml"
    config.write_text(
        config.read_text()
        + '\n[ai]\nbinding = "AI"\n[ai.models."@cf/meta/llama-3.1-8b-instruct"]\n'
        + 'checkpoint = "./ckpt"\n'
    )
    deployed = ember("deploy", "--temporary")
    assert "ai.models (@cf/meta/llama-3.1-8b-instruct) applies to ember dev only" in (
        deployed.stderr
    )
    assert "Deployed hello triggers" in deployed.stdout


def test_a_deploy_without_ai_models_says_nothing_about_them(ember: Ember) -> None:
    assert "ai.models" not in ember("deploy", "--temporary").stderr


@pytest.fixture
def keeps_two(tmp_path: Path) -> Iterator[RunningPlatform]:
    """A platform whose workers keep their 2 most recent versions."""
    config = dataclasses.replace(TEST_CONFIG, versions_kept_per_worker=2)
    plane, clock, server, hub = start_platform(tmp_path / "state", config)
    try:
        with server as port:
            url = f"http://127.0.0.1:{port}"
            yield RunningPlatform(plane, clock, url, url + "/client/v4", hub)
    finally:
        plane.close()


def test_rollback_past_the_kept_versions(
    keeps_two: RunningPlatform, tmp_path: Path, project: Path
) -> None:
    ember = Ember(keeps_two, tmp_path / "home", project)
    account, issued = keeps_two.plane.accounts.create_permanent("acme")
    ember("login", "--token", issued.token)
    ember("deploy", "--message", "one")
    (v1,) = (v.id for v in keeps_two.plane.scripts.versions(account, "hello"))
    for message in ("two", "three", "four"):
        ember("deploy", "--message", message)
    v4, v3 = (v.id for v in keeps_two.plane.scripts.versions(account, "hello"))
    listing = ember("deployments", "list").stdout  # names only versions that still exist
    messages = re.findall(r"^Message:\s+(.+)$", listing, re.MULTILINE)
    assert messages == ["three", "four"], listing

    history = keeps_two.plane.scripts.deployments(account, "hello")
    refused = ember("rollback", v1, ok=False)  # pruned: the unknown-version refusal, and why
    assert refused.returncode == 1 and "[code: 10001]" in refused.stderr
    assert v1 in refused.stderr and "keeps its 2 most recent versions" in refused.stderr
    assert keeps_two.plane.scripts.deployments(account, "hello") == history

    rolled = ember("rollback").stdout  # the previous deployment's version is kept
    assert rolled.endswith(f"Current Version ID: {v3}\n"), rolled
    assert keeps_two.plane.scripts.live(account, "hello").versions[0].version_id == v3
    assert {v.id for v in keeps_two.plane.scripts.versions(account, "hello")} == {v3, v4}


def test_a_kv_binding_added_to_a_deployed_worker_gets_its_namespace(
    platform: RunningPlatform, ember: Ember, project: Path
) -> None:
    """A KV binding without an id inherits the worker's namespace of that name; one the worker
    does not have yet (added to the config since) gets one, as on the first deploy."""
    _, issued = platform.plane.accounts.create_permanent("acme")
    ember("login", "--token", issued.token)
    ember("deploy")
    toml = project / "wrangler.toml"
    toml.write_text(toml.read_text() + '\n[[kv_namespaces]]\nbinding = "CACHE"\n')
    ember("deploy")
    account = platform.plane.accounts.find("acme")
    assert account is not None
    titles = sorted(n.title for n in platform.plane.namespaces.list(account))
    assert titles == ["hello-cache", "hello-kv"]
    live = platform.plane.scripts.live(account, "hello").versions[0].version_id
    bound = platform.plane.scripts.version(account, "hello", live).bindings
    assert sorted(b.name for b in bound if b.type == "kv_namespace") == ["CACHE", "KV"]
