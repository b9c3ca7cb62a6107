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

    deleted = acme("secret", "delete", "OTHER")
    assert deleted.stdout == (
        "🌀 Deleting the secret OTHER on the Worker hello\n✨ Success! Deleted secret OTHER\n"
    )
    acme("secret", "delete", "API_KEY")
    assert acme("secret", "list").stdout == "[]\n"
