"""``ember deploy``'s CI flags against a real ``ember serve``: ``--var``, ``--keep-vars``,
``--secrets-file``, ``--compatibility-date/-flags``, ``--latest``, ``--tag``, ``--triggers``,
``--dry-run`` and ``--outdir``, each checked at the deployed worker or in the platform's state."""

from __future__ import annotations

import datetime
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import ServeProcess, permanent_account
from tests.serve.test_cli import _ember

EMBER_YAML = """\
name: flagged
main: src/entry.py
compatibility_date: "2026-11-01"
vars: {GREETING: hey}
kv_namespaces: [{binding: KV}]
env:
  staging:
    vars: {GREETING: staged}
"""
ENTRY = """\
from workers import Response

async def on_fetch(request, env):
    seen = [getattr(env, n, "-") for n in ("GREETING", "EXTRA", "TOKEN", "OTHER")]
    return Response(" ".join(seen))
"""


class Project:
    """A project directory, a credentials home and a token, deployed with ``ember``."""

    def __init__(self, serve: ServeProcess, root: Path, token: str) -> None:
        self.serve = serve
        self.root = root
        self.token = token
        (root / "src").mkdir(parents=True)
        (root / "ember.yaml").write_text(EMBER_YAML)
        (root / "src" / "entry.py").write_text(ENTRY)
        (root / "src" / "helper.py").write_text("X = 1\n")

    def ember(self, *args: str, ok: bool = True, stdin: str = "", **environ: str) -> Any:
        env = {"EMBER_API_TOKEN": self.token, **environ}
        result = _ember(self.serve, self.root / "home", self.root, *args, env=env, input=stdin)
        if ok:
            assert result.returncode == 0, result.stdout + result.stderr
        return result

    def api(self, account_id: str, path: str) -> Any:
        with self.serve.api(self.token) as client:
            reply = client.get(f"/accounts/{account_id}/workers/scripts/{path}")
        assert reply.status_code == 200, reply.text
        return reply.json()["result"]


@pytest.fixture
def project(serve: ServeProcess, tmp_path: Path, request: pytest.FixtureRequest) -> Project:
    name = "flags-" + secrets.token_hex(4)
    _, token = permanent_account(serve, name)
    return Project(serve, tmp_path / "project", token)


def _version(project: Project, account_id: str, name: str, version_id: str) -> Any:
    return project.api(account_id, f"{name}/versions/{version_id}")


def test_vars_secrets_dates_and_tag_reach_the_deployed_worker(
    serve: ServeProcess, project: Project
) -> None:
    (project.root / "secrets.json").write_text(json.dumps({"TOKEN": "t1", "GONE": None}))
    first = project.ember(
        "deploy", "--json",
        "--var", "EXTRA:a:b", "GREETING:override",  # a yargs array, as wrangler takes it
        "--secrets-file", "secrets.json",
        "--compatibility-date", "2026-10-01", "--compatibility-flags", "no_flag_x",
        "--tag", "ci-123", "--message", "from CI",
    )  # fmt: skip
    result = json.loads(first.stdout)
    account, account_id = result["account"], result["account_id"]
    # --var overrides the config's var and adds one; the value keeps every ':' after the first.
    assert serve.worker(account, "flagged").text == "override a:b t1 -"
    version = _version(project, account_id, "flagged", result["version_id"])
    runtime = version["resources"]["script_runtime"]
    assert runtime["compatibility_date"] == "2026-10-01"
    assert runtime["compatibility_flags"] == ["no_flag_x", "python_workers"]
    annotations = version["annotations"]
    assert annotations["workers/message"] == "from CI" and annotations["workers/tag"] == "ci-123"

    # A secret set on the platform survives a deploy; the file's secrets are added or replaced
    # (wrangler: "omitted secrets will not be deleted"). Without --var, vars are the config's.
    project.ember("secret", "put", "OTHER", stdin="o1\n")
    (project.root / ".env.ci").write_text("TOKEN=t2\n")
    project.ember("deploy", "--secrets-file", ".env.ci")
    assert serve.worker(account, "flagged").text == "hey - t2 o1"

    # --keep-vars keeps the vars the platform has that the config lacks; without it they go.
    project.ember("deploy", "--var", "EXTRA:kept")
    project.ember("deploy", "--keep-vars")
    assert serve.worker(account, "flagged").text == "hey kept t2 o1"
    project.ember("deploy")
    assert serve.worker(account, "flagged").text == "hey - t2 o1"

    # --latest: today's date (UTC), with wrangler's warning; it wins over the config's date.
    latest = project.ember("deploy", "--latest", "--json")
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    version = _version(project, account_id, "flagged", json.loads(latest.stdout)["version_id"])
    assert version["resources"]["script_runtime"]["compatibility_date"] == today
    assert "Using the latest compatibility date" in latest.stderr

    # --triggers replaces triggers.crons; each schedule is listed under the URLs, as wrangler
    # deploy lists them ("  schedule: CRON").
    deployed = project.ember("deploy", "--triggers", "*/5 * * * *", "--schedule", "0 1 * * *")
    assert "\n  schedule: */5 * * * *\n  schedule: 0 1 * * *\nCurrent Version ID: " in (
        deployed.stdout
    )
    schedules = project.api(account_id, "flagged/schedules")["schedules"]
    assert [s["cron"] for s in schedules] == ["*/5 * * * *", "0 1 * * *"]


def test_flags_apply_to_the_environment_deployed(serve: ServeProcess, project: Project) -> None:
    # A .env secrets file expands $VAR from the environment, as wrangler's does.
    (project.root / "s.env").write_text("TOKEN=staged-${SUFFIX}\n")
    out = project.ember(
        "deploy", "--env", "staging", "--json", "--var", "EXTRA:e", "--secrets-file", "s.env",
        "--compatibility-date", "2026-09-09", SUFFIX="secret",
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert result["name"] == "flagged-staging"
    assert serve.worker(result["account"], "flagged-staging").text == "staged e staged-secret -"
    version = _version(project, result["account_id"], "flagged-staging", result["version_id"])
    assert version["resources"]["script_runtime"]["compatibility_date"] == "2026-09-09"


def test_temporary_deploy_takes_the_flags(serve: ServeProcess, tmp_path: Path) -> None:
    project = Project(serve, tmp_path / "project", "")
    (project.root / "secrets.json").write_text(json.dumps({"TOKEN": "tmp"}))
    out = _ember(
        serve, tmp_path / "home", project.root, "deploy", "--temporary", "--json",
        "--var", "EXTRA:x", "--secrets-file", "secrets.json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert serve.worker(result["account"], "flagged").text == "hey x tmp -"


def _platform_state(serve: ServeProcess) -> tuple[int, ...]:
    """How many accounts, scripts and versions the platform holds."""
    plane = serve.plane()
    try:
        with plane.db.reader() as conn:
            return tuple(
                conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("accounts", "scripts", "versions")
            )
    finally:
        plane.close()


def test_dry_run_uploads_nothing_and_outdir_holds_the_modules(
    serve: ServeProcess, project: Project
) -> None:
    (project.root / "secrets.json").write_text(json.dumps({"TOKEN": "never-printed"}))
    # Beside the entry: the module rules take data.txt (Text), not key.pem or notes.md.
    for name in ("data.txt", "key.pem", "notes.md"):
        (project.root / "src" / name).write_text(name)
    before = _platform_state(serve)
    out = project.ember(
        "deploy", "--dry-run", "--outdir", "dist", "--var", "EXTRA:hidden-value",
        "--secrets-file", "secrets.json",
    )  # fmt: skip
    assert _platform_state(serve) == before
    assert out.stdout.rstrip().endswith("--dry-run: exiting now.")
    assert "Uploaded" not in out.stdout and "never-printed" not in out.stdout
    assert "hidden-value" not in out.stdout
    lines = out.stdout.splitlines()
    assert "Your Worker has access to the following bindings:" in lines
    assert any(line.startswith("Total Upload: ") for line in lines)
    rows = {line.split()[0]: line for line in lines if line.startswith("env.")}
    assert rows["env.GREETING"].startswith('env.GREETING ("hey")')
    assert rows["env.EXTRA"].startswith('env.EXTRA ("(hidden)")')
    assert rows["env.TOKEN"].startswith('env.TOKEN ("(hidden)")')
    assert rows["env.KV"].rstrip().endswith("KV Namespace")

    dist = project.root / "dist"
    assert sorted(p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file()) == [
        "README.md",
        "data.txt",
        "entry.py",
        "helper.py",
    ]
    assert (dist / "entry.py").read_text() == ENTRY
    assert 'worker "flagged"' in (dist / "README.md").read_text()

    # Not even a temporary account is made for one.
    temporary = project.ember("deploy", "--dry-run", "--temporary")
    assert "--dry-run: exiting now." in temporary.stdout
    assert _platform_state(serve) == before

    # A dry run needs no platform and no credentials at all.
    offline = _ember(
        serve, project.root / "nohome", project.root, "deploy", "--dry-run", "--json",
        env={"EMBER_PLATFORM": "http://127.0.0.1:9"},
    )  # fmt: skip
    assert offline.returncode == 0, offline.stderr
    summary = json.loads(offline.stdout)
    assert summary["dry_run"] is True and summary["name"] == "flagged"
    assert summary["modules"] == ["entry.py", "data.txt", "helper.py"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--var", "NOCOLON"), ["--var", "KEY:VALUE"]),
        (("--var", ":value"), ["--var", "KEY:VALUE"]),
        (("--secrets-file", "missing.json"), ["--secrets-file", "missing.json"]),
        (("--compatibility-date", "2999-01-01"), ["--compatibility-date", "future"]),
        (("--compatibility-date", "yesterday"), ["--compatibility-date", "YYYY-MM-DD"]),
        (("--triggers", "every minute"), ["--triggers", "every minute"]),
        # The platform counts the day of week 1 = Sunday to 7 = Saturday: 0 is no day.
        (("--triggers", "0 9 * * 0"), ["--triggers", "0 is outside 1-7", "1 or SUN for Sunday"]),
        # A var named like a binding would hide it on env: refused, as ember dev refuses it.
        (("--var", "KV:shadow"), ["--var", "KV", "kv_namespace binding"]),
    ],
)
def test_bad_flag_values_are_refused_before_anything_is_uploaded(
    serve: ServeProcess, project: Project, args: tuple[str, ...], expected: list[str]
) -> None:
    before = _platform_state(serve)
    refused = project.ember("deploy", *args, ok=False)
    assert refused.returncode != 0
    for text in expected:
        assert text in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert _platform_state(serve) == before


def test_a_secret_over_the_size_limit_is_refused_by_the_platform(
    serve: ServeProcess, project: Project
) -> None:
    # The limit `secret put` enforces holds for secrets that arrive with an upload too.
    (project.root / "big.json").write_text(json.dumps({"BIG": "x" * (5 * 1024 + 1)}))
    before = _platform_state(serve)
    refused = project.ember("deploy", "--secrets-file", "big.json", ok=False)
    assert refused.returncode == 1
    assert "'BIG'" in refused.stderr and "5,120 bytes" in refused.stderr, refused.stderr
    assert "xxxx" not in refused.stderr
    assert _platform_state(serve) == before


def test_versions_upload_takes_the_same_flags(serve: ServeProcess, project: Project) -> None:
    """``ember versions upload`` shares deploy's upload flags (wrangler's shared deploy args):
    a dry run uploads nothing; a real upload carries --var, --secrets-file and the tag, and
    sends no traffic until ``versions deploy``."""
    deployed = json.loads(project.ember("deploy", "--json").stdout)
    account, account_id = deployed["account"], deployed["account_id"]
    listed = project.api(account_id, "flagged/versions")["items"]
    dry = project.ember("versions", "upload", "--var", "EXTRA:x", "--dry-run")
    assert dry.stdout.rstrip().endswith("--dry-run: exiting now.")
    assert len(project.api(account_id, "flagged/versions")["items"]) == len(listed)

    (project.root / "secrets.json").write_text(json.dumps({"TOKEN": "v2"}))
    uploaded = project.ember(
        "versions", "upload", "--var", "EXTRA:x", "--secrets-file", "secrets.json",
        "--tag", "v2", "--message", "second",
    )  # fmt: skip
    version_id = uploaded.stdout.split("Worker Version ID: ", 1)[1].split()[0]
    assert serve.worker(account, "flagged").text == "hey - - -"  # not deployed yet
    annotations = _version(project, account_id, "flagged", version_id)["annotations"]
    assert annotations["workers/tag"] == "v2" and annotations["workers/message"] == "second"
    project.ember("versions", "deploy", version_id, "--yes")
    assert serve.worker(account, "flagged").text == "hey x v2 -"


def test_a_secret_named_like_a_binding_is_refused_before_upload(
    serve: ServeProcess, project: Project
) -> None:
    (project.root / "clash.json").write_text(json.dumps({"KV": "shadow"}))
    before = _platform_state(serve)
    refused = project.ember("deploy", "--secrets-file", "clash.json", ok=False)
    assert refused.returncode != 0 and "--secrets-file" in refused.stderr
    assert "kv_namespace binding" in refused.stderr and "Traceback" not in refused.stderr
    assert _platform_state(serve) == before
