"""``ember kv bulk ... --remote`` and ``ember secret bulk`` against a real platform (uvicorn on
loopback), the CLI run as subprocesses, with wrangler's file formats and output lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.platform.conftest import RunningPlatform
from tests.platform.helpers import error_of
from tests.platform.test_cli import Ember, ember, project  # noqa: F401 - fixtures

REMOTE = ("--binding", "KV", "--remote")


@pytest.fixture
def acme(platform: RunningPlatform, ember: Ember) -> Ember:  # noqa: F811 - the fixture
    """A logged-in permanent account with the project deployed (its KV binding provisioned)."""
    _, issued = platform.plane.accounts.create_permanent("acme")
    ember("login", "--token", issued.token)
    ember("deploy")
    return ember


def _secrets(ember: Ember) -> list[str]:  # noqa: F811
    """The worker's secret names, from ``secret list``'s JSON (wrangler's default format)."""
    found = json.loads(ember("secret", "list").stdout)
    assert all(item["type"] == "secret_text" for item in found), found
    return [item["name"] for item in found]


def _keys(ember: Ember) -> list[str]:  # noqa: F811
    return [k["name"] for k in json.loads(ember("kv", "key", "list", *REMOTE).stdout)]


def test_remote_bulk_put_get_delete_in_wranglers_formats(acme: Ember, project: Path) -> None:  # noqa: F811
    items = [
        {"key": "plain", "value": "v1"},
        {"key": "bytes", "value": "aGVsbG8=", "base64": True},
        {"key": "meta", "value": "m", "metadata": {"a": 1}, "expiration_ttl": 600},
    ]
    (project / "put.json").write_text(json.dumps(items))
    put = acme("kv", "bulk", "put", "put.json", *REMOTE)
    assert put.stdout.splitlines()[0] == "Resource location: remote"
    assert put.stdout.endswith("Success!\n")
    assert acme("kv", "key", "get", "bytes", *REMOTE).stdout == "hello"
    listed = {k["name"]: k for k in json.loads(acme("kv", "key", "list", *REMOTE).stdout)}
    assert listed["meta"]["metadata"] == {"a": 1} and "expiration" in listed["meta"]

    (project / "keys.json").write_text(json.dumps(["plain", {"name": "bytes"}, "absent"]))
    got = json.loads(acme("kv", "bulk", "get", "keys.json", *REMOTE).stdout)
    assert got == {"plain": "v1", "bytes": "hello", "absent": None}  # the API's values

    deleted = acme("kv", "bulk", "delete", "keys.json", "--force", *REMOTE)
    assert deleted.stdout.endswith("Success!\n")
    assert _keys(acme) == ["meta"]


def test_a_large_remote_bulk_put_goes_in_several_requests_with_progress(
    acme: Ember,
    project: Path,  # noqa: F811
) -> None:
    items = [{"key": f"k{i:05}", "value": "x" * 300} for i in range(2500)]
    (project / "put.json").write_text(json.dumps(items))
    put = acme("kv", "bulk", "put", "put.json", *REMOTE).stdout
    assert "Uploaded 0% (0 out of 2,500)" in put and "Uploaded 100% (2,500 out of 2,500)" in put
    assert len(_keys(acme)) == 2500
    (project / "keys.json").write_text(json.dumps([i["key"] for i in items]))
    gone = acme("kv", "bulk", "delete", "keys.json", "-f", *REMOTE).stdout
    assert "Deleted 100% (2,500 out of 2,500)" in gone
    assert _keys(acme) == []


def test_a_bad_remote_bulk_file_is_refused_before_any_request(acme: Ember, project: Path) -> None:  # noqa: F811
    items = [{"key": f"k{i}", "value": "v"} for i in range(1500)]
    items[1200]["expiration_ttl"] = 5  # past the first request's worth of items
    (project / "put.json").write_text(json.dumps(items))
    refused = acme("kv", "bulk", "put", "put.json", *REMOTE, ok=False)
    assert refused.returncode == 1
    assert "bulk item 1200 (key 'k1200'): Invalid expiration_ttl of 5." in refused.stderr
    assert _keys(acme) == []


def test_secret_bulk_from_a_json_file_is_one_new_version(
    platform: RunningPlatform,
    acme: Ember,
    project: Path,  # noqa: F811
) -> None:
    account = platform.plane.accounts.find("acme")
    assert account is not None
    before = len(platform.plane.scripts.versions(account, "hello"))
    (project / "secrets.json").write_text(json.dumps({"API_KEY": "k1", "DB_URL": "postgres://x"}))
    out = acme("secret", "bulk", "secrets.json").stdout
    assert out == (
        '🌀 Processing the secrets for the Worker "hello"\n'
        "✨ Successfully created secret for key: API_KEY\n"
        "✨ Successfully created secret for key: DB_URL\n"
        "\n"
        "Finished processing secrets file:\n"
        "✨ 2 secrets successfully created\n"
    )
    assert len(platform.plane.scripts.versions(account, "hello")) == before + 1
    assert _secrets(acme) == ["API_KEY", "DB_URL"]

    # null deletes (JSON merge patch); the others are left as they are.
    (project / "secrets.json").write_text(json.dumps({"API_KEY": None, "NEW": "n"}))
    out = acme("secret", "bulk", "secrets.json").stdout
    assert "💥 Successfully deleted secret for key: API_KEY\n" in out
    assert out.endswith("💥 1 secrets successfully deleted\n✨ 1 secrets successfully created\n")
    assert _secrets(acme) == ["DB_URL", "NEW"]


def test_secret_bulk_reads_dotenv_from_stdin(acme: Ember) -> None:
    out = acme("secret", "bulk", stdin="TOKEN=abc\n# a comment\nOTHER='x y'\n").stdout
    assert "✨ 2 secrets successfully created" in out
    assert _secrets(acme) == ["OTHER", "TOKEN"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"A": 1}', 'The value for "A" in "bad.json" is not null or a "string" instead it is of '
                     'type "number"'),
        ("not json and not dotenv", 'The contents of "bad.json" is not valid.'),
        ('{"GOOD": "x", "bad name": "y"}', "secret name 'bad name' must be an identifier"),
    ],
)  # fmt: skip
def test_a_bad_secrets_file_changes_nothing(
    platform: RunningPlatform,
    acme: Ember,
    project: Path,  # noqa: F811
    content: str,
    expected: str,
) -> None:
    account = platform.plane.accounts.find("acme")
    assert account is not None
    before = len(platform.plane.scripts.versions(account, "hello"))
    (project / "bad.json").write_text(content)
    refused = acme("secret", "bulk", "bad.json", ok=False)
    assert refused.returncode == 1 and expected in refused.stderr, refused.stderr
    assert (refused.stdout + refused.stderr).count(expected) == 1, refused.stderr  # said once
    assert "Traceback" not in refused.stderr
    assert len(platform.plane.scripts.versions(account, "hello")) == before
    assert _secrets(acme) == []


def test_secret_bulk_with_nothing_on_stdin_says_so(acme: Ember) -> None:
    empty = acme("secret", "bulk", stdin="", ok=False)
    said = "🚨 No content found in file, or piped input."
    assert empty.returncode == 1 and (empty.stdout + empty.stderr).count(said) == 1, empty.stderr


def test_secrets_bulk_route_is_a_merge_patch_of_at_most_100(platform: RunningPlatform) -> None:
    _, issued = platform.plane.accounts.create_permanent("beta")
    with platform.client(issued.token) as client:
        account_id = client.get("/accounts").json()["result"][0]["id"]
        path = f"/accounts/{account_id}/workers/scripts/nope/secrets-bulk"
        missing = client.patch(path, json={"secrets": {"A": None}})
        assert error_of(missing)[:2] == (404, 10007)
        too_many = {
            f"S{i}": {"name": f"S{i}", "text": "x", "type": "secret_text"} for i in range(101)
        }
        refused = client.patch(path, json={"secrets": too_many})
        assert refused.status_code == 400 and "at most 100" in error_of(refused)[2]
        assert error_of(client.patch(path, json={"nope": 1}))[0] == 400
