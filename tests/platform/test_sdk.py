"""The real ``cloudflare`` Python SDK (5.9) against ember's client/v4 API."""

from __future__ import annotations

import pytest

from tests.platform.conftest import RunningPlatform

cloudflare = pytest.importorskip("cloudflare")


def test_sdk_scripts_secrets_subdomain_kv_accounts(platform: RunningPlatform) -> None:
    account, issued = platform.plane.accounts.create_permanent("sdk")
    client = cloudflare.Cloudflare(api_token=issued.token, base_url=platform.api, max_retries=0)
    src = b"from workers import WorkerEntrypoint, Response\n"
    script = client.workers.scripts.update(
        "sdk-py",
        account_id=account.id,
        metadata={
            "main_module": "entry.py",
            "compatibility_date": "2026-11-01",
            "compatibility_flags": ["python_workers"],
            "bindings": [{"name": "GREETING", "type": "plain_text", "text": "hi"}],
        },
        files=[("entry.py", src, "text/x-python")],
    )
    assert script.id == "sdk-py" and script.etag
    stored = platform.plane.scripts.live(account, "sdk-py")
    version = platform.plane.scripts.version(account, "sdk-py", stored.versions[0].version_id)
    assert version.source == "api"  # SDK uploads are recorded as API uploads
    assert [m.content for m in platform.plane.scripts.modules(version.id)] == [src]
    assert [s.id for s in client.workers.scripts.list(account_id=account.id)] == ["sdk-py"]

    client.workers.scripts.secrets.update(
        "sdk-py", account_id=account.id, name="TOKEN", text="s3", type="secret_text"
    )
    names = [s.name for s in client.workers.scripts.secrets.list("sdk-py", account_id=account.id)]
    assert names == ["TOKEN"]
    sub = client.workers.scripts.subdomain.create("sdk-py", account_id=account.id, enabled=True)
    assert sub.enabled is True

    namespace = client.kv.namespaces.create(account_id=account.id, title="sdk-kv")
    listed = client.kv.namespaces.list(account_id=account.id)
    assert [n.id for n in listed] == [namespace.id]
    accounts = client.accounts.list()
    assert [a.id for a in accounts] == [account.id]


def test_sdk_errors_are_typed(platform: RunningPlatform) -> None:
    account, issued = platform.plane.accounts.create_permanent("sdk")
    client = cloudflare.Cloudflare(api_token=issued.token, base_url=platform.api, max_retries=0)
    with pytest.raises(cloudflare.NotFoundError) as missing:
        client.workers.scripts.secrets.list("missing", account_id=account.id)
    assert "10007" in str(missing.value) or "does not exist" in str(missing.value)
    other = cloudflare.Cloudflare(api_token="ember_wrong", base_url=platform.api, max_retries=0)
    with pytest.raises(cloudflare.AuthenticationError):
        other.workers.scripts.list(account_id=account.id)
    with pytest.raises(cloudflare.PermissionDeniedError):
        client.workers.scripts.list(account_id="0" * 32)
