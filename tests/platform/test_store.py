"""The control-plane state: accounts, tokens, claim, limits, versions, secrets, GC, durability."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ember.errors import AuthError
from ember.runtime.deployments import pow
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.config import (
    PlatformConfig,
    ProofOfWorkConfig,
    TemporaryAccountConfig,
)
from ember.runtime.deployments.errors import (
    ClaimRejected,
    ClaimsTurnedOff,
    InvalidUpload,
    QuotaExceeded,
    RateLimited,
    ScriptNotFound,
    Unauthenticated,
    UploadTooLarge,
)
from ember.runtime.deployments.multipart import Part, parse_multipart
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Account, SecretValue
from ember.runtime.deployments.upload import parse_worker_upload
from tests.platform.conftest import worker_upload

ROOT = Path(__file__).resolve().parents[2]
CONFIG = PlatformConfig(
    proof_of_work=ProofOfWorkConfig(k=16, g=16, sample=4),
    temporary=TemporaryAccountConfig(
        creations_per_client_per_hour=3, max_workers=2, max_script_bytes=2000, max_kv_namespaces=2
    ),
)


@pytest.fixture
def plane(tmp_path: Path) -> ControlPlane:
    plane = ControlPlane(tmp_path / "state", CONFIG, clock=ManualClock())
    yield plane
    plane.close()


def temporary(plane: ControlPlane, client: str = "10.0.0.1"):  # noqa: ANN201
    challenge = plane.issue_challenge()
    return plane.create_temporary_account(
        client, challenge.token, {"checkpoints": pow.solve_challenge(challenge)}
    )


def upload(**kwargs: object):  # noqa: ANN201
    body, content_type = worker_upload(**kwargs)
    return parse_worker_upload(parse_multipart(body, content_type))


def test_tokens_are_stored_hashed_and_scoped(plane: ControlPlane) -> None:
    account, issued = plane.accounts.create_permanent("acme")
    found, token = plane.accounts.authenticate(issued.token)
    assert found == account and token.account_id == account.id
    dump = "\n".join(plane.db._conn.iterdump())  # noqa: SLF001 - inspecting the file's content
    assert issued.token not in dump
    assert issued.token not in repr(issued)
    with pytest.raises(Unauthenticated):
        plane.accounts.authenticate(issued.token + "x")
    with pytest.raises(Unauthenticated):
        plane.accounts.authenticate(None)


def test_temporary_account_expires_and_rate_limit_applies(plane: ControlPlane) -> None:
    created = temporary(plane)
    assert created.account.expires_at == created.account.created_at + 3600
    plane.accounts.authenticate(created.token.token)
    plane.clock.advance(3601)
    with pytest.raises(Unauthenticated, match="unknown or revoked"):  # as if deleted already
        plane.accounts.authenticate(created.token.token)
    temporary(plane), temporary(plane), temporary(plane)
    with pytest.raises(RateLimited, match="limit is 3"):
        temporary(plane)
    temporary(plane, client="10.0.0.2")  # another client is unaffected


def test_claim_ends_the_asset_uploads_the_temporary_token_opened(plane: ControlPlane) -> None:
    """An upload is authorised by its session's token, not the API token: after a claim, the
    agent that made the temporary deploy must not go on storing files (under hashes a later
    manifest of the new owner would trust) with a session it opened before."""
    created = temporary(plane)
    manifest = {"manifest": {"/a.txt": {"hash": "a" * 32, "size": 1}}}
    token = plane.start_assets(created.account, manifest)["jwt"]
    plane.assets.session(created.account.id, token)  # open
    plane.claim(created.claim_token, "127.0.0.1")
    with pytest.raises(Unauthenticated):
        plane.assets.session(created.account.id, token)


def test_claim_makes_permanent_and_rotates_the_token(plane: ControlPlane) -> None:
    created = temporary(plane)
    claimed = plane.accounts.claim(created.claim_token, "127.0.0.1")
    assert claimed.account.kind == "permanent" and claimed.account.expires_at is None
    with pytest.raises(Unauthenticated):
        plane.accounts.authenticate(created.token.token)
    plane.accounts.authenticate(claimed.token.token)
    with pytest.raises(ClaimRejected):
        plane.accounts.claim(created.claim_token, "127.0.0.1")
    plane.clock.advance(10 * 3600)
    assert plane.gc.collect().accounts_deleted == ()
    plane.accounts.authenticate(claimed.token.token)


def test_claims_are_capped_per_client_in_a_sliding_day(tmp_path: Path) -> None:
    config = dataclasses.replace(
        CONFIG,
        temporary=dataclasses.replace(
            CONFIG.temporary, creations_per_client_per_hour=10, claims_per_day=2
        ),
    )
    plane = ControlPlane(tmp_path / "state", config, clock=ManualClock())
    try:
        first, second, third = (temporary(plane) for _ in range(3))
        plane.accounts.claim(first.claim_token, "10.0.0.9")
        plane.clock.advance(600)
        plane.accounts.claim(second.claim_token, "10.0.0.9")
        with pytest.raises(RateLimited, match="claims_per_day") as refused:
            plane.accounts.claim(third.claim_token, "10.0.0.9")
        assert refused.value.retry_after == 86400 - 600  # when the first claim leaves the day
        assert plane.accounts.get(third.account.id).kind == "temporary"  # nothing changed
        plane.accounts.claim(third.claim_token, "10.0.0.10")  # another client is unaffected

        plane.clock.advance(86400 - 600)  # the first claim is a day old: one slot again
        plane.accounts.claim(temporary(plane).claim_token, "10.0.0.9")
        plane.gc.collect()
        with plane.db.reader() as conn:
            kept = conn.execute("SELECT COUNT(*) FROM account_claims").fetchone()[0]
        assert kept == 3  # the sweep forgot the claim older than a day
    finally:
        plane.close()


def test_claims_turned_off_are_refused(tmp_path: Path) -> None:
    config = dataclasses.replace(
        CONFIG, temporary=dataclasses.replace(CONFIG.temporary, claim="off")
    )
    plane = ControlPlane(tmp_path / "state", config, clock=ManualClock())
    try:
        created = temporary(plane)
        with pytest.raises(ClaimsTurnedOff, match="operator for an account"):
            plane.accounts.claim(created.claim_token, "10.0.0.9")
        assert plane.accounts.get(created.account.id).kind == "temporary"
    finally:
        plane.close()


def test_expired_claim_is_refused(plane: ControlPlane) -> None:
    created = temporary(plane)
    plane.clock.advance(3600)
    with pytest.raises(ClaimRejected, match="expired"):
        plane.accounts.claim(created.claim_token, "127.0.0.1")


def test_temporary_limits(plane: ControlPlane) -> None:
    account = temporary(plane).account
    with pytest.raises(UploadTooLarge, match="2,000 bytes"):
        plane.scripts.upload(account, "big", upload(source=b"x" * 2001), deploy=True, source="api")
    plane.scripts.upload(account, "one", upload(), deploy=True, source="api")
    plane.scripts.upload(account, "two", upload(), deploy=True, source="api")
    with pytest.raises(QuotaExceeded, match="at most 2"):
        plane.scripts.upload(account, "three", upload(), deploy=True, source="api")
    plane.namespaces.create(account, "a"), plane.namespaces.create(account, "b")
    with pytest.raises(QuotaExceeded):
        plane.namespaces.create(account, "c")


def test_versions_inherit_and_keep_bindings(plane: ControlPlane) -> None:
    account, _ = plane.accounts.create_permanent("acme")
    ns = plane.namespaces.create(account, "hello-kv")
    first = plane.scripts.upload(
        account,
        "hello",
        upload(
            bindings=[
                {"name": "KV", "type": "kv_namespace", "namespace_id": ns.id},
                {"name": "S", "type": "secret_text", "text": "one"},
                {"name": "V", "type": "plain_text", "text": "var"},
            ]
        ),
        deploy=True,
        source="wrangler",
    )
    second = plane.scripts.upload(
        account,
        "hello",
        upload(bindings=[{"name": "KV", "type": "inherit"}], keep_bindings=["secret_text"]),
        deploy=False,
        source="wrangler",
    )
    assert {b.name: b.config for b in second.version.bindings} == {"KV": {"namespace_id": ns.id}}
    assert second.version.secret_names == (("S", "secret_text"),)
    assert [s.value for s in plane.scripts.secret_values(second.version.id)] == ["one"]
    with pytest.raises(InvalidUpload, match="no binding named 'NOPE'"):
        plane.scripts.upload(
            account,
            "hello",
            upload(bindings=[{"name": "NOPE", "type": "inherit"}]),
            deploy=False,
            source="wrangler",
            strict_inherit=True,
        )
    live = plane.scripts.live(account, "hello")
    assert live is not None and live.versions[0].version_id == first.version.id
    with pytest.raises(ScriptNotFound):
        plane.scripts.upload(account, "missing", upload(), deploy=False, source="api")


def test_secret_put_derives_and_deploys_a_version(plane: ControlPlane) -> None:
    account, _ = plane.accounts.create_permanent("acme")
    first = plane.scripts.upload(account, "hello", upload(), deploy=True, source="api")
    secret_version = plane.secrets.put(
        account, "hello", SecretValue("TOKEN", "secret_text", "s3cr3t-zq"), "api"
    ).version
    assert secret_version.annotations["workers/triggered_by"] == "secret"
    assert plane.scripts.live(account, "hello").versions[0].version_id == secret_version.id
    assert plane.scripts.modules(secret_version.id) == plane.scripts.modules(first.version.id)
    assert "s3cr3t-zq" not in repr(plane.scripts.secret_values(secret_version.id))
    plane.secrets.delete(account, "hello", "TOKEN", "api")
    assert plane.secrets.list(account, "hello") == []


def test_python_modules_are_importable_whatever_their_content_type(
    plane: ControlPlane, tmp_path: Path
) -> None:
    account, _ = plane.accounts.create_permanent("acme")
    vendored = [
        Part(
            "python_modules/vendpkg/__init__.py",
            "python_modules/vendpkg/__init__.py",
            "application/octet-stream",
            b"VALUE = 42\n",
        ),
        Part("helper.py", "helper.py", "text/x-python", b"from vendpkg import VALUE\n"),
    ]
    result = plane.scripts.upload(
        account, "hello", upload(extra_parts=vendored), deploy=True, source="wrangler"
    )
    written = plane.materialize(account.id, result.version)
    code = "import sys; sys.path[:0] = sys.argv[1:]; import helper; print(helper.VALUE)"
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, written.import_paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "42"


def _snapshot(db_path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(db_path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    snap = {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr) for t in tables}
    conn.close()
    return snap


def test_gc_deletes_an_expired_account_with_everything_in_it(plane: ControlPlane) -> None:
    keeper, _ = plane.accounts.create_permanent("keeper")
    plane.scripts.upload(keeper, "stay", upload(), deploy=True, source="api")
    plane.gc.collect()
    before = _snapshot(plane.db.path)
    before.pop("temporary_account_creations")
    before.pop("used_challenges")

    created = temporary(plane)
    account = created.account
    ns = plane.namespaces.create(account, "tmp-kv")
    result = plane.scripts.upload(
        account,
        "doomed",
        upload(
            bindings=[
                {"name": "KV", "type": "kv_namespace", "namespace_id": ns.id},
                {"name": "S", "type": "secret_text", "text": "secret-value-123"},
            ]
        ),
        deploy=True,
        source="api",
    )
    plane.secrets.put(account, "doomed", SecretValue("T", "secret_text", "v2"), "api")
    plane.tails.create(account, "doomed", {"filters": []})
    plane.materialize(account.id, result.version)
    assert plane.files.account_dir(account.id).exists()

    plane.clock.advance(CONFIG.temporary.ttl_seconds + 1)
    report = plane.gc.collect()
    assert report.accounts_deleted == (account.id,)
    after = _snapshot(plane.db.path)
    after.pop("temporary_account_creations")
    after.pop("used_challenges")
    assert after == before
    plane.db._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # noqa: SLF001
    # secure_delete zeroes freed pages, so not even the bytes of a secret stay in the file.
    raw = plane.db.path.read_bytes()
    assert b"secret-value-123" not in raw and account.id.encode() not in raw
    assert not plane.files.account_dir(account.id).exists()
    assert not any(account.id in str(p) for p in plane.state_dir.rglob("*"))


WRITER = """
import sys
from pathlib import Path
from ember.runtime.deployments.plane import ControlPlane
plane = ControlPlane(Path(sys.argv[1]))
account, _ = plane.accounts.create_permanent("acme")
for i in range(10_000):
    plane.namespaces.create(account, f"ns-{i}")
    print(i, flush=True)
"""


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "state")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 50:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    plane = ControlPlane(tmp_path / "state")
    account = plane.accounts.find("acme")
    assert isinstance(account, Account)
    titles = {n.title for n in plane.namespaces.list(account)}
    assert {f"ns-{i}" for i in range(acknowledged + 1)} <= titles
    plane.close()


def test_unknown_binding_type_lists_supported_ones() -> None:
    with pytest.raises(InvalidUpload, match="supported binding types: ai, assets, inherit, json"):
        upload(bindings=[{"name": "DB", "type": "d1", "id": "x"}])


def test_auth_errors_are_auth_errors(plane: ControlPlane) -> None:
    with pytest.raises(AuthError):
        plane.accounts.authenticate("ember_nope")


def test_metadata_json_round_trip() -> None:
    parsed = upload(metadata_first=False, annotations={"workers/message": "m"})
    assert parsed.annotations == {"workers/message": "m"}
    assert json.loads(json.dumps(parsed.extra_metadata)) == parsed.extra_metadata
