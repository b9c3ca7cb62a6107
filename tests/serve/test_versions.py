"""wrangler's versions and gradual deployments on a real ``ember serve``, through ember's CLI.

Two versions of a worker that answers its own name, deployed 30/70: each request picks a
version by weight, the version-overrides header pins one, bad splits are refused naming the
field, and the isolates of versions that leave the deployment stop.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.serve.conftest import BASE_CONFIG, ServeProcess, permanent_account
from tests.serve.test_cli import _ember
from tests.serve.test_idle import descendants

EMBER_YAML = """\
name: split
main: src/entry.py
compatibility_date: "2026-11-01"
"""
ENTRY = """\
from workers import Response

async def on_fetch(request, env):
    return Response("{tag}")
"""
OVERRIDES = "cloudflare-workers-version-overrides"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
Ember = Callable[..., subprocess.CompletedProcess[str]]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "ember.yaml").write_text(EMBER_YAML)
    return project


def _runner(serve: ServeProcess, tmp_path: Path, project: Path, **base: str) -> Ember:
    def ember(
        *args: str, ok: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = _ember(serve, tmp_path / "home", project, *args, env=base | (env or {}))
        if ok:
            assert result.returncode == 0, result.stdout + result.stderr
        return result

    return ember


def _write(project: Path, tag: str) -> None:
    (project / "src" / "entry.py").write_text(ENTRY.format(tag=tag))


def _uploaded(result: subprocess.CompletedProcess[str]) -> str:
    found = re.search(rf"^Worker Version ID: ({UUID})$", result.stdout, re.M)
    assert found, result.stdout
    return found.group(1)


def _answers(serve: ServeProcess, account: str, count: int, **headers: str) -> list[str]:
    with httpx.Client(base_url=serve.url, timeout=60) as client:
        host = {"host": f"split.{account}.localhost"}
        return [client.get("/", headers=host | headers).text for _ in range(count)]


def test_upload_list_view_and_a_30_70_split(serve: ServeProcess, tmp_path: Path) -> None:
    project = _project(tmp_path)
    _, token = permanent_account(serve, "gradual")
    ember = _runner(serve, tmp_path, project, EMBER_API_TOKEN=token)
    _write(project, "one")
    first = json.loads(ember("deploy", "--json").stdout)["version_id"]

    _write(project, "two")
    uploaded = ember("versions", "upload", "--message", "second", "--tag", "t2")
    second = _uploaded(uploaded)
    assert uploaded.stdout.startswith("Uploaded split (")
    assert "ember versions deploy" in uploaded.stdout
    assert set(_answers(serve, "gradual", 5)) == {"one"}  # uploaded, not deployed

    listed = json.loads(ember("versions", "list", "--json").stdout)
    assert [v["id"] for v in listed] == [first, second]  # oldest first, as wrangler lists
    newest = listed[1]
    assert newest["annotations"] == {
        "workers/message": "second",
        "workers/tag": "t2",
        "workers/triggered_by": "version_upload",  # Cloudflare's tag for POST .../versions
    }
    assert {"created_on", "author_email", "source"} <= set(newest["metadata"])
    assert newest["resources"]["script_runtime"]["compatibility_date"] == "2026-11-01"
    text = ember("versions", "list").stdout
    assert f"Version ID:  {second}\nCreated:     {newest['metadata']['created_on']}\n" in text
    assert "Source:      Version Upload\nTag:         t2\nMessage:     second\n\n" in text

    assert json.loads(ember("versions", "view", second, "--json").stdout) == newest
    view = ember("versions", "view", second).stdout
    assert view.startswith(f"Version ID:  {second}\n")
    assert "\nCompatibility Date:   2026-11-01\n" in view

    deployed = ember("versions", "deploy", f"{first}@30%", f"{second}@70", "--message", "canary")
    assert f"Your current deployment has 1 version(s):\n(100%) {first}\n" in deployed.stdout
    assert f"Deployed split version {first} at 30% and version {second} at 70% (" in (
        deployed.stdout
    )
    status = json.loads(ember("deployments", "status", "--json").stdout)
    assert status["versions"] == [
        {"version_id": first, "percentage": 30},
        {"version_id": second, "percentage": 70},
    ]
    assert status["annotations"]["workers/message"] == "canary"
    text = ember("deployments", "status").stdout
    assert "Message:     canary\n" in text
    assert f"Version(s):  (30%) {first}\n                 Created:  " in text
    assert f"\n\n             (70%) {second}\n" in text

    # Each request picks independently: 600 draws of p=0.3 lie within 6 sigma of 180.
    answers = _answers(serve, "gradual", 600)
    sigma = math.sqrt(600 * 0.3 * 0.7)
    assert set(answers) == {"one", "two"}
    assert abs(answers.count("one") - 180) < 6 * sigma, answers.count("one")

    # The version-overrides header pins a request to a version of the deployment.
    assert set(_answers(serve, "gradual", 30, **{OVERRIDES: f'split="{second}"'})) == {"two"}
    assert set(_answers(serve, "gradual", 30, **{OVERRIDES: f'split="{first}"'})) == {"one"}
    both = f'other="{second}", split="{first}";p=1'
    assert set(_answers(serve, "gradual", 20, **{OVERRIDES: both})) == {"one"}

    # 0% is a version that gets no traffic by chance, only by override (a smoke test).
    ember("versions", "deploy", f"{first}@100", f"{second}@0", "--yes")
    assert set(_answers(serve, "gradual", 60)) == {"one"}
    assert set(_answers(serve, "gradual", 20, **{OVERRIDES: f'split="{second}"'})) == {"two"}
    for ignored in (f"split={second}", f'split="{second}', f'split=("{second}")', "split"):
        assert set(_answers(serve, "gradual", 5, **{OVERRIDES: ignored})) == {"one"}, ignored

    # A single version id means 100%; rollback still makes one version live.
    ember("versions", "deploy", second)
    assert set(_answers(serve, "gradual", 20)) == {"two"}
    ember("rollback", first, "--message", "back")
    assert set(_answers(serve, "gradual", 20)) == {"one"}
    live = json.loads(ember("deployments", "status", "--json").stdout)
    assert live["versions"] == [{"version_id": first, "percentage": 100}]
    assert live["annotations"]["workers/triggered_by"] == "rollback"
    assert f"Version ID:  {second}" in ember("versions", "list").stdout


def test_bad_splits_are_refused_naming_the_field(serve: ServeProcess, tmp_path: Path) -> None:
    project = _project(tmp_path)
    account_id, token = permanent_account(serve, "refuse")
    ember = _runner(serve, tmp_path, project, EMBER_API_TOKEN=token)
    _write(project, "one")
    first = json.loads(ember("deploy", "--json").stdout)["version_id"]
    _write(project, "two")
    second = _uploaded(ember("versions", "upload"))
    other = json.loads(ember("deploy", "--name", "other", "--json").stdout)["version_id"]

    def refused(versions: object) -> str:
        with serve.api(token) as api:
            reply = api.post(
                f"/accounts/{account_id}/workers/scripts/split/deployments",
                json={"strategy": "percentage", "versions": versions},
            )
        assert reply.status_code == 400, reply.text
        return reply.json()["errors"][0]["message"]

    def target(version_id: str, percentage: object) -> dict[str, object]:
        return {"version_id": version_id, "percentage": percentage}

    three = [target(first, 40), target(second, 30), target(other, 30)]
    assert "versions names 3 versions" in refused(three)
    assert "add up to 90" in refused([target(first, 50), target(second, 40)])
    assert "versions[1].percentage is 101" in refused([target(first, 0), target(second, 101)])
    assert "versions[0].percentage is -1" in refused([target(first, -1), target(second, 101.0)])
    assert "versions[0].percentage must be a number" in refused([target(first, True)])
    assert "versions[0].percentage must be a number" in refused([target(first, "100")])
    assert "versions[1].version_id repeats versions[0]" in refused(
        [target(first, 50), target(first, 50)]
    )
    assert f"versions[0].version_id {other!r} is not a version" in refused([target(other, 100)])
    unknown = "00000000-0000-4000-8000-000000000000"
    assert "versions[1].version_id" in refused([target(first, 50), target(unknown, 50)])
    assert "versions must be a non-empty list" in refused([])
    assert "versions[0] must be an object" in refused([first])

    for args, expected in (
        ((f"{first}@50", f"{second}@40"), "add up to 90%"),
        ((first, second, other), "3 versions named"),
        ((f"{first}@half",), "is not a percentage"),
        ((f"{first}@101",), "101% is out of range"),
        (("--version-id", "v1"), "is not a version id"),
        ((), "no version to deploy"),
    ):
        result = ember("versions", "deploy", *args, ok=False)
        assert result.returncode == 1 and expected in result.stderr, (args, result.stderr)
    result = ember("versions", "deploy", f"{other}@100", ok=False)
    assert "versions[0].version_id" in result.stderr
    assert set(_answers(serve, "refuse", 10)) == {"one"}  # nothing changed
    assert "ember deployments status" in ember("deployments", "view", ok=False).stderr
    assert "ember versions view" in ember("deployments", "view", first, ok=False).stderr


def test_temporary_accounts_upload_and_deploy_versions(serve: ServeProcess, tmp_path: Path) -> None:
    project = _project(tmp_path)
    ember = _runner(serve, tmp_path, project)
    _write(project, "one")
    result = json.loads(ember("deploy", "--temporary", "--json").stdout)
    account, first = result["account"], result["version_id"]
    _write(project, "two")
    uploaded = ember("versions", "upload", "--temporary")
    assert "Temporary account ready:" in uploaded.stderr and "(reused)" in uploaded.stderr
    second = _uploaded(uploaded)
    ember("versions", "deploy", f"{first}@50", f"{second}@50", "--temporary")
    assert set(_answers(serve, account, 60)) == {"one", "two"}
    listed = json.loads(ember("versions", "list", "--temporary", "--json").stdout)
    assert [v["id"] for v in listed] == [first, second]
    status = json.loads(ember("deployments", "status", "--temporary", "--json").stdout)
    assert [v["percentage"] for v in status["versions"]] == [50, 50]
    assert ember("versions", "view", second, "--temporary").stdout.startswith("Version ID:")


def test_versions_leaving_the_deployment_stop_their_isolates(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG)
    try:
        assert serve.proc is not None
        root = serve.proc.pid
        project = _project(tmp_path)
        _, token = permanent_account(serve, "gradual")
        ember = _runner(serve, tmp_path, project, EMBER_API_TOKEN=token)
        base = descendants(root)
        _write(project, "one")
        first = json.loads(ember("deploy", "--json").stdout)["version_id"]
        assert set(_answers(serve, "gradual", 2)) == {"one"}
        one = descendants(root) - base
        assert one

        _write(project, "two")
        second = _uploaded(ember("versions", "upload"))  # started, to refuse it if it fails
        two = descendants(root) - base - one
        assert two
        _write(project, "three")
        third = _uploaded(ember("versions", "upload"))
        _gone(root, two)  # an upload nobody deployed does not keep its isolate
        three = descendants(root) - base - one

        ember("versions", "deploy", f"{first}@30", f"{third}@70")
        assert set(_answers(serve, "gradual", 60)) == {"one", "three"}
        assert one | three <= descendants(root)  # both versions' isolates live
        ember("versions", "deploy", f"{third}@100")
        _gone(root, one)
        assert set(_answers(serve, "gradual", 10)) == {"three"}
        ember("rollback", second)
        _gone(root, three)
        assert set(_answers(serve, "gradual", 10)) == {"two"}
    finally:
        serve.stop()


def _gone(root: int, pids: set[int]) -> None:
    deadline = time.monotonic() + 30
    while descendants(root) & pids:
        assert time.monotonic() < deadline, f"isolate processes {pids} still run"
        time.sleep(0.1)


def test_env_chooses_the_environments_worker(serve: ServeProcess, tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "ember.yaml").write_text(EMBER_YAML + "env:\n  staging: {}\n")
    _, token = permanent_account(serve, "staged")
    ember = _runner(serve, tmp_path, project, EMBER_API_TOKEN=token)
    _write(project, "one")
    first = json.loads(ember("deploy", "--env", "staging", "--json").stdout)["version_id"]
    _write(project, "two")
    uploaded = ember("versions", "upload", "-e", "staging")
    assert uploaded.stdout.startswith("Uploaded split-staging (")
    second = _uploaded(uploaded)
    ember("versions", "deploy", f"{first}@20", f"{second}@80", "--env", "staging")
    status = json.loads(
        ember("deployments", "status", "--json", env={"CLOUDFLARE_ENV": "staging"}).stdout
    )
    assert [v["version_id"] for v in status["versions"]] == [first, second]
    listed = json.loads(ember("versions", "list", "--json", "--name", "split-staging").stdout)
    assert [v["id"] for v in listed] == [first, second]
    missing = ember("versions", "list", ok=False)  # the top level was never deployed
    assert missing.returncode == 1 and "split" in missing.stderr
    warned = ember("versions", "upload", "--name", "split-staging")
    assert "no target environment was specified" in warned.stderr


def test_deploy_over_a_split_warns_then_replaces_it(serve: ServeProcess, tmp_path: Path) -> None:
    """As wrangler's confirmLatestDeploymentOverwrite: ``ember deploy`` over a deployment of
    two versions shows that deployment and warns that the rollout is replaced; without a
    terminal to ask (CI) it goes on, and the new version takes all the traffic."""
    project = _project(tmp_path)
    _, token = permanent_account(serve, "overwrite")
    ember = _runner(serve, tmp_path, project, EMBER_API_TOKEN=token)
    _write(project, "one")
    first = json.loads(ember("deploy", "--json").stdout)["version_id"]
    _write(project, "two")
    second = _uploaded(ember("versions", "upload"))
    ember("versions", "deploy", f"{first}@50", f"{second}@50", "--yes")

    _write(project, "three")
    deployed = ember("deploy")
    assert (
        "Your last deployment has multiple versions. To progress that deployment use "
        '"ember versions deploy" instead.' in deployed.stderr
    )
    assert f"(50%) {first}" in deployed.stderr and f"(50%) {second}" in deployed.stderr
    assert set(_answers(serve, "overwrite", 10)) == {"three"}
    # A deployment of one version deploys without the warning; --json keeps stdout JSON.
    _write(project, "four")
    plain = ember("deploy", "--json")
    assert "multiple versions" not in plain.stderr
    json.loads(plain.stdout)
