"""``ember serve`` runs no tenant's code where it can read the platform's state (every account's
secrets, KV and code) unless the operator says every worker is trusted; it says at start what
each kind of account gets, and ``/health`` says whether workers run unwalled."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import (
    BASE_CONFIG,
    ServeProcess,
    answer,
    permanent_account,
    put_worker,
)

NAMESPACES = "mount_ns,pid_ns,net_ns,ipc_uts_ns"
# What a host without namespaces or Landlock gives (Docker's default seccomp profile, say).
BARE = f"{NAMESPACES},landlock,seccomp,cgroup,uid"
# A handler that looks for the platform's state files and reads what it can of them.
PEEK = """\
import json, os
from workers import Response


async def on_fetch(request, env):
    found = {}
    for name in ("platform.db", "platform.db-wal", "kv.sqlite3", "accounts"):
        path = os.path.join(env.STATE, name)
        try:
            if os.path.isdir(path):
                found[name] = sorted(os.listdir(path))
            else:
                with open(path, "rb") as f:
                    found[name] = len(f.read())
        except OSError as exc:
            found[name] = type(exc).__name__
    return Response(json.dumps(found))
"""


def _peek(serve: ServeProcess, owner: str) -> dict[str, object]:
    """A victim with a secret, then ``owner``'s worker reading the state directory."""
    victim_id, victim_token = permanent_account(serve, "victim")
    with serve.api(victim_token) as api:
        secret = [{"name": "TOKEN", "type": "secret_text", "text": "s3cret-of-the-victim"}]
        stored = put_worker(api, victim_id, "vault", answer("vault"), bindings=secret)
        assert stored.status_code == 200, stored.text
    account_id, token = permanent_account(serve, owner)
    state = [{"name": "STATE", "type": "plain_text", "text": str(serve.state_dir)}]
    with serve.api(token) as api:
        assert put_worker(api, account_id, "peek", PEEK, bindings=state).status_code == 200
    reply = serve.worker(owner, "peek")
    assert reply.status_code == 200, reply.text
    return json.loads(reply.text)


@pytest.mark.parametrize("layers", [BARE, BARE.replace(",uid", "")], ids=["no-layers", "uid-only"])
def test_without_a_wall_serve_refuses_to_start_and_names_the_fix(
    tmp_path: Path, layers: str
) -> None:
    with pytest.raises(RuntimeError, match="did not start") as failed:
        ServeProcess(tmp_path / "state", BASE_CONFIG, "--disable-sandbox-layers", layers).stop()
    output = str(failed.value)
    assert "ember serve refused to start" in output
    assert "mount_ns: forced off" in output and "landlock: forced off" in output
    assert "--trusted-workers" in output
    assert "Traceback" not in output


def test_landlock_alone_walls_the_state_directory(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path / "state",
        BASE_CONFIG,
        "--disable-sandbox-layers",
        f"{NAMESPACES},seccomp,cgroup,uid",
    )
    try:
        output = serve.output()
        assert "permanent accounts: profile 'full' (" in output
        assert "kept out of the state directory by landlock" in output
        assert "temporary accounts: profile 'anonymous', refused" in output
        found = _peek(serve, "peeker")
        assert set(found.values()) == {"PermissionError"}, found
        health = httpx.get(serve.url + "/health", timeout=30).json()
        assert health["trusted_workers"] is False
        assert health["state_dir_walled_by"] == ["landlock"]
    finally:
        serve.stop()


def test_trusted_workers_is_the_operators_loud_opt_out(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path / "state", BASE_CONFIG, "--disable-sandbox-layers", BARE, "--trusted-workers"
    )
    try:
        output = serve.output()
        assert "TRUSTED WORKERS (--trusted-workers): every worker can read the state" in output
        assert "mount_ns: forced off" in output
        health = httpx.get(serve.url + "/health", timeout=30).json()
        assert health["trusted_workers"] is True and health["state_dir_walled_by"] == []
        found = _peek(serve, "trusted")  # what the opt-out means: nothing is walled
        assert isinstance(found["platform.db"], int) and found["platform.db"] > 0, found
    finally:
        serve.stop()


def test_the_full_sandbox_says_what_each_account_kind_gets(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", BASE_CONFIG)
    try:
        output = serve.output()
        assert "kept out of the state directory by mount_ns and landlock" in output
        assert "temporary accounts: profile 'anonymous', accepted" in output
        assert "TRUSTED" not in output
        found = _peek(serve, "peeker")
        assert set(found.values()) == {"FileNotFoundError"}, found
    finally:
        serve.stop()
