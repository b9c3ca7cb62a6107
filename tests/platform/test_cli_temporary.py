"""The temporary account ``ember deploy --temporary`` caches, as wrangler treats its own
(cloudflare-api.md §4.3): a plain ``deploy`` does not pick it up; the other commands act on it
only saying so on stderr, and take wrangler's ``--temporary`` (workers-sdk
``experimental-commands-api.test.ts`` pins the commands with ``supportTemporary``)."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime

from tests.platform.conftest import RunningPlatform
from tests.platform.test_cli import Ember, ember, project  # noqa: F401 - fixtures

REMOTE = ("--binding", "KV", "--remote")


def _temporary(ember: Ember) -> dict[str, str]:  # noqa: F811
    return json.loads(ember("deploy", "--temporary", "--json").stdout)


def test_a_plain_deploy_refuses_the_cached_temporary_account(
    platform: RunningPlatform,
    ember: Ember,  # noqa: F811
) -> None:
    first = _temporary(ember)
    refused = ember("deploy", ok=False)
    assert refused.returncode == 1, refused.stdout
    error = refused.stderr
    assert re.search(rf"temporary account {first['account']} \(expires in \d+ minutes", error)
    assert "`ember deploy --temporary`" in error and "`ember login" in error, error
    assert "Current Version ID" not in refused.stdout
    account = platform.plane.accounts.find(first["account"])
    assert account is not None
    assert len(platform.plane.scripts.versions(account, "hello")) == 1  # nothing uploaded

    # Nor do the commands that upload or deploy versions (wrangler's use the cache only with
    # --temporary as well).
    for args in (("versions", "upload"), ("versions", "deploy", f"{first['version_id']}@100")):
        refused = ember(*args, ok=False)
        assert refused.returncode == 1, (args, refused.stdout)
        command = "ember " + " ".join(args[:2])
        assert f"plain `{command}` does not use it" in refused.stderr, refused.stderr
        assert f"`{command} --temporary`" in refused.stderr
    assert len(platform.plane.scripts.versions(account, "hello")) == 1

    again = ember("deploy", "--temporary")  # the flag still deploys there, saying so
    assert "Temporary account ready:" in again.stdout and "(reused)" in again.stdout
    assert len(platform.plane.scripts.versions(account, "hello")) == 2


def test_every_command_that_falls_back_to_it_says_so(ember: Ember) -> None:  # noqa: F811
    name = _temporary(ember)["account"]
    notice = re.compile(rf"temporary account {name} \(expires in \d+ minutes")
    version = json.loads(ember("versions", "list", "--json").stdout)[0]["id"]
    for args, stdin in (
        (("secret", "put", "TOKEN"), "s3\n"),
        (("secret", "list"), ""),
        (("secret", "bulk"), '{"OTHER": "x"}'),
        (("secret", "delete", "OTHER"), ""),
        (("deployments", "list"), ""),
        (("deployments", "status"), ""),
        (("versions", "list"), ""),
        (("versions", "view", version), ""),
        (("kv", "key", "put", "k", "v", *REMOTE), ""),
        (("kv", "key", "get", "k", *REMOTE), ""),
        (("kv", "key", "list", *REMOTE), ""),
        (("kv", "namespace", "list"), ""),
        (("tail", "--max-events", "0"), ""),
        (("rollback", "--yes"), ""),
        (("whoami",), ""),
    ):
        done = ember(*args, stdin=stdin)
        assert notice.search(done.stderr), (args, done.stderr)
        assert not notice.search(done.stdout), args  # stdout stays what scripts read
    # `ember ai models --url` sends the cached token too (this platform has no AI routes: the
    # listing fails, after the notice).
    listed = ember("ai", "models", "--url", ember.env["EMBER_PLATFORM"], ok=False)
    assert notice.search(listed.stderr), listed.stderr
    deleted = ember("delete", "--yes")
    assert notice.search(deleted.stderr), deleted.stderr


def test_wranglers_temporary_flag_is_accepted_where_wrangler_takes_it(ember: Ember) -> None:  # noqa: F811
    name = _temporary(ember)["account"]
    reused = f"Account: {name} (reused)"
    version = json.loads(ember("versions", "list", "--json").stdout)[0]["id"]
    # workers-sdk: commands whose definition has behaviour.supportTemporary (ember's share).
    for args, stdin in (
        (("secret", "put", "TOKEN", "--temporary"), "s3\n"),
        (("secret", "list", "--temporary"), ""),
        (("secret", "bulk", "--temporary"), '{"OTHER": "x"}'),
        (("secret", "delete", "OTHER", "--temporary"), ""),
        (("deployments", "list", "--temporary"), ""),
        (("deployments", "status", "--temporary"), ""),
        (("versions", "view", version, "--temporary"), ""),
        (("kv", "key", "put", "k", "v", *REMOTE, "--temporary"), ""),
        (("kv", "key", "get", "k", *REMOTE, "--temporary"), ""),
        (("kv", "key", "list", *REMOTE, "--temporary"), ""),
        (("kv", "key", "delete", "k", *REMOTE, "--temporary"), ""),
        (("kv", "namespace", "list", "--temporary"), ""),
        (("tail", "--max-events", "0", "--temporary"), ""),
        (("rollback", "--yes", "--temporary"), ""),
        (("delete", "--yes", "--temporary"), ""),
    ):
        done = ember(*args, stdin=stdin)
        assert reused in done.stderr, (args, done.stderr)
    # wrangler's whoami rejects --temporary as an unknown argument; so does ember's.
    assert ember("whoami", "--temporary", ok=False).returncode == 2


def test_the_notice_names_the_time_left(ember: Ember) -> None:  # noqa: F811
    _temporary(ember)
    stored = json.loads(ember.credentials.read_text())
    (entry,) = stored["temporary"].values()
    # What the cache says (the platform keeps its own expiry): 3 hours, whatever the run takes.
    entry["expires_at"] = entry["claim_expires_at"] = time.time() + 3 * 3600 + 600
    ember.credentials.write_text(json.dumps(stored))
    said = ember("secret", "list").stderr
    assert re.search(r"temporary account \S+ \(expires in 3 hours unless claimed", said), said


def test_an_expired_cached_account_is_named_with_its_expiry(
    platform: RunningPlatform,
    ember: Ember,  # noqa: F811
) -> None:
    name = _temporary(ember)["account"]
    stored = json.loads(ember.credentials.read_text())
    (entry,) = stored["temporary"].values()
    ended = time.time() - 120
    entry["expires_at"] = entry["claim_expires_at"] = ended
    ember.credentials.write_text(json.dumps(stored))
    platform.clock.advance(3601)  # the platform's account expired too
    at = datetime.fromtimestamp(ended, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    said = (
        f"your temporary account {name} expired at {at} and was deleted with its workers; "
        "`ember deploy --temporary` makes a new one"
    )
    for args in (("whoami",), ("deploy",), ("secret", "list")):
        refused = ember(*args, ok=False)
        assert refused.returncode == 1, (args, refused.stdout)
        assert said in refused.stderr, (args, refused.stderr)
        assert "Traceback" not in refused.stderr
