"""``ember secret`` asks what wrangler asks (workers-sdk ``src/secret/index.ts``, ``dialogs.ts``):
``delete`` confirms ("Are you sure you want to permanently delete the secret KEY on the Worker
NAME?"), and ``put`` / ``bulk`` for a worker that does not exist offer to create it. At a
terminal the question is asked (Enter: yes, as wrangler's default); in a script or CI the question
is printed with wrangler's fallback answer, yes. The terminal here is a real one (a pty)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from tests.platform.conftest import RunningPlatform
from tests.platform.test_cli import Ember, ember, project  # noqa: F401 - fixtures

QUESTION = 'There doesn\'t seem to be a Worker called "{}". Do you want to create a new Worker with that name and add secrets to it?'  # noqa: E501 - wrangler's words, whole
FALLBACK = "🤖 Using fallback value in non-interactive context: yes"


@pytest.fixture
def logged_in(platform: RunningPlatform, ember: Ember) -> Ember:  # noqa: F811 - the fixture
    """A logged-in permanent account with nothing deployed."""
    _, issued = platform.plane.accounts.create_permanent("acme")
    ember("login", "--token", issued.token)
    return ember


def at_terminal(ember: Ember, args: list[str], answers: list[tuple[str, str]]) -> tuple[int, str]:  # noqa: F811
    """Run ``ember ARGS`` on a pty; for each (prompt, answer), wait for the prompt, then type."""
    leader, follower = os.openpty()
    env = {k: v for k, v in ember.env.items() if k != "CI"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember", *args],
        cwd=ember.cwd,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    seen = b""

    def read_until(wanted: bytes | None, deadline: float) -> None:
        nonlocal seen
        while wanted is None or wanted not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the command exited and closed the terminal
                chunk = b""
            if not chunk:
                assert wanted is None, seen.decode(errors="replace")
                return
            seen += chunk

    try:
        deadline = time.monotonic() + 120
        for prompt, answer in answers:
            read_until(prompt.encode(), deadline)
            os.write(leader, answer.encode())
        read_until(None, deadline)
        code = proc.wait(60)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, seen.decode(errors="replace").replace("\r\n", "\n")


def test_secret_delete_confirms_as_wrangler_does(logged_in: Ember) -> None:
    ember = logged_in  # noqa: F811
    ember("deploy")
    ember("secret", "put", "A", stdin="x")
    ember("secret", "put", "B", stdin="y")
    question = "Are you sure you want to permanently delete the secret A on the Worker hello?"

    code, said = at_terminal(ember, ["secret", "delete", "A"], [(question, "n\n")])
    assert code == 0, said
    assert "Deleting" not in said and "Success" not in said, said
    assert [s["name"] for s in json.loads(ember("secret", "list").stdout)] == ["A", "B"]

    code, said = at_terminal(ember, ["secret", "delete", "A"], [(question, "\n")])  # Enter: yes
    assert code == 0 and "✨ Success! Deleted secret A" in said, said
    assert [s["name"] for s in json.loads(ember("secret", "list").stdout)] == ["B"]

    piped = ember("secret", "delete", "B")  # a script: the fallback, yes, said on stdout
    assert piped.stdout == (
        "? Are you sure you want to permanently delete the secret B on the Worker hello?\n"
        f"{FALLBACK}\n"
        "🌀 Deleting the secret B on the Worker hello\n"
        "✨ Success! Deleted secret B\n"
    )
    assert json.loads(ember("secret", "list").stdout) == []


def test_secret_put_offers_to_create_a_missing_worker(
    platform: RunningPlatform,
    logged_in: Ember,
) -> None:
    ember = logged_in  # noqa: F811
    account = platform.plane.accounts.find("acme")
    assert account is not None

    code, said = at_terminal(
        ember,
        ["secret", "put", "TOKEN", "--name", "declined"],
        [("Enter a secret value:", "v1\n"), (QUESTION.format("declined"), "n\n")],
    )
    assert code == 0 and "Aborting. No secrets added." in said, said
    assert platform.plane.scripts.list(account) == []

    made = ember("secret", "put", "TOKEN", stdin="s3cr3t\n")  # the project's worker, "hello"
    assert made.stdout == (
        '🌀 Creating the secret for the Worker "hello"\n'
        f"? {QUESTION.format('hello')}\n{FALLBACK}\n"
        '🌀 Creating new Worker "hello"...\n'
        "✨ Success! Uploaded secret TOKEN\n"
    )
    assert json.loads(ember("secret", "list").stdout) == [{"name": "TOKEN", "type": "secret_text"}]
    # The draft, then the secret's version of it: a Python placeholder, which ember serves.
    drafts = platform.plane.scripts.versions(account, "hello")
    assert [v.annotations["workers/triggered_by"] for v in drafts] == ["secret", "upload"]
    assert {m.name for m in platform.plane.scripts.modules(drafts[0].id)} == {"entry.py"}

    ember("deploy")  # the real code replaces the draft and keeps its secret
    newest = platform.plane.scripts.versions(account, "hello")[0]
    assert newest.secret_names == (("TOKEN", "secret_text"),)
    assert newest.main_module == "entry.py"


def test_secret_bulk_offers_to_create_a_missing_worker(
    platform: RunningPlatform,
    logged_in: Ember,
) -> None:
    ember = logged_in  # noqa: F811
    done = ember("secret", "bulk", "--name", "fresh", stdin='{"A": "1", "B": "2"}')
    assert f"? {QUESTION.format('fresh')}\n{FALLBACK}\n" in done.stdout, done.stdout
    assert '🌀 Creating new Worker "fresh"...\n' in done.stdout
    assert "✨ 2 secrets successfully created" in done.stdout
    listed = json.loads(ember("secret", "list", "--name", "fresh").stdout)
    assert [s["name"] for s in listed] == ["A", "B"]
    # Only deletions for a worker that does not exist: nothing to create it for (wrangler's).
    refused = ember("secret", "bulk", "--name", "absent", stdin='{"A": null}', ok=False)
    assert "[code: 10007]" in refused.stderr and "Creating new Worker" not in refused.stdout
