"""The lines of ``ember secret``, ``deployments list``, ``rollback`` and ``delete`` that scripts
written for wrangler read, pinned to workers-sdk's own tests and e2e snapshots (``secret/index.ts``,
``versions/deployments/list.ts``, ``e2e/deployments.test.ts``, ``__tests__/delete.test.ts``)."""

from __future__ import annotations

import json

import pytest

from tests.platform.conftest import RunningPlatform
from tests.platform.test_cli import Ember, ember, project  # noqa: F401 - fixtures


@pytest.fixture
def acme(platform: RunningPlatform, ember: Ember) -> Ember:  # noqa: F811 - the fixture
    """A logged-in permanent account with the project ``hello`` deployed."""
    _, issued = platform.plane.accounts.create_permanent("acme")
    ember("login", "--token", issued.token)
    ember("deploy")
    return ember


def test_secret_put_list_delete_print_wranglers_lines(acme: Ember) -> None:
    put = acme("secret", "put", "API_KEY", stdin="s3cr3t\n")
    assert put.stdout == (
        '🌀 Creating the secret for the Worker "hello"\n✨ Success! Uploaded secret API_KEY\n'
    )
    assert "new version" in put.stderr  # ember's own note, off stdout
    acme("secret", "put", "OTHER", stdin="x")
    listed = acme("secret", "list")
    # wrangler's default --format json: JSON.stringify(secrets, null, "  ").
    assert json.loads(listed.stdout) == [
        {"name": "API_KEY", "type": "secret_text"},
        {"name": "OTHER", "type": "secret_text"},
    ]
    assert listed.stdout.startswith('[\n  {\n    "name": "API_KEY",\n')
    pretty = acme("secret", "list", "--format", "pretty").stdout
    assert pretty == "Secret Name: API_KEY\n\nSecret Name: OTHER\n\n"
    bad = acme("secret", "list", "--format", "yaml", ok=False)
    assert bad.returncode == 2 and "'json', 'pretty'" in bad.stderr

    deleted = acme("secret", "delete", "OTHER")  # no terminal: wrangler's question, answered
    assert deleted.stdout == (
        "? Are you sure you want to permanently delete the secret OTHER on the Worker hello?\n"
        "🤖 Using fallback value in non-interactive context: yes\n"
        "🌀 Deleting the secret OTHER on the Worker hello\n✨ Success! Deleted secret OTHER\n"
    )
    acme("secret", "delete", "API_KEY")
    assert acme("secret", "list").stdout == "[]\n"


def test_deployments_list_prints_wranglers_blocks_oldest_first(
    platform: RunningPlatform,
    acme: Ember,  # noqa: F811
) -> None:
    platform.clock.advance(60)
    acme("deploy", "--message", "second")
    platform.clock.advance(60)
    acme("secret", "put", "KEY", stdin="v\n")
    newest_first = json.loads(acme("deployments", "status", "--json").stdout)

    listed = acme("deployments", "list")
    blocks = listed.stdout.rstrip("\n").split("\n\nCreated:")
    assert len(blocks) == 3, listed.stdout
    # wrangler sorts by created_on ascending (versions/deployments/list.ts) and labels each
    # line as deployments status does; the newest block is status's output.
    sources = [
        line.split(None, 1)[1] for line in listed.stdout.splitlines() if line.startswith("Source:")
    ]
    assert sources == ["Upload", "Deployment", "Secret Change"], listed.stdout
    assert "Created:" + blocks[-1] + "\n" == acme("deployments", "status").stdout
    assert "\nMessage:     second\n" in listed.stdout
    assert listed.stdout.startswith("Created:     ")
    assert f"Version(s):  (100%) {newest_first['versions'][0]['version_id']}\n" in listed.stdout
    assert "                 Created:  " in listed.stdout  # the version's own details
    # The worker's local URLs are ember's own: on stderr, so stdout stays wrangler's.
    assert "http://hello.acme.localhost:" in listed.stderr
    assert "hello.acme.localhost" not in listed.stdout

    as_json = json.loads(acme("deployments", "list", "--json").stdout)
    assert [d["annotations"]["workers/triggered_by"] for d in as_json] == [
        "upload",
        "deployment",
        "secret",
    ]
    assert as_json[-1] == newest_first


def test_rollback_and_delete_print_wranglers_last_lines(
    platform: RunningPlatform,
    acme: Ember,  # noqa: F811
) -> None:
    account = platform.plane.accounts.find("acme")
    assert account is not None
    (first,) = (v.id for v in platform.plane.scripts.versions(account, "hello"))
    acme("deploy")
    rolled = acme("rollback", "--message", "undo").stdout
    # wrangler's e2e snapshot (e2e/deployments.test.ts "rolls back") ends with these two lines.
    assert rolled.endswith(
        f"╰  SUCCESS  Worker Version {first} has been deployed to 100% of traffic.\n\n"
        f"Current Version ID: {first}\n"
    ), rolled
    assert platform.plane.scripts.live(account, "hello").versions[0].version_id == first

    deleted = acme("delete", "--yes")
    assert deleted.stdout.splitlines()[-1] == "Successfully deleted hello"  # __tests__/delete
