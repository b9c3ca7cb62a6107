"""Upload metadata is bounded per field and counted in the account's stored bytes.

Only module bytes were counted: 20 uploads with a 60 MiB ``observability`` value grew
platform.db past a 1 GiB cap, and 10,000 compatibility flags got a misleading frame-limit error.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from ember.runtime.deployments.metadata_limits import (
    MAX_COMPATIBILITY_FLAGS,
    MAX_METADATA_FIELD_BYTES,
    MAX_TAGS,
    MAX_VAR_BYTES,
    MAX_VARS,
    MAX_VARS_TEMPORARY,
)
from tests.platform.conftest import TEST_CONFIG, worker_upload
from tests.platform.helpers import error_of, put_upload, temporary_tenant


def _put(client: httpx.Client, account_id: str, name: str, **kw: object) -> httpx.Response:
    return put_upload(client, account_id, name, **kw)


def test_metadata_counts_against_the_stored_bytes_cap(tmp_path: Path) -> None:
    temporary = replace(TEST_CONFIG.temporary, max_stored_script_bytes=20_000)
    config = replace(TEST_CONFIG, temporary=temporary)
    observability = {"enabled": True, "note": "y" * 9_000}
    with temporary_tenant(tmp_path / "state", config) as (_platform, account_id, client):
        assert _put(client, account_id, "a", observability=observability).status_code == 200
        assert _put(client, account_id, "b", observability=observability).status_code == 200
        status, code, message = error_of(_put(client, account_id, "c", observability=observability))
        assert (status, code) == (403, 10037)
        assert "20,000" in message and "metadata" in message
        listed = client.get(f"/accounts/{account_id}/workers/scripts").json()["result"]
        assert sorted(s["id"] for s in listed) == ["a", "b"]  # the refused one stored nothing


@pytest.mark.parametrize(
    ("metadata", "field", "limit"),
    [
        ({"compatibility_flags": [f"flag_{i}" for i in range(10_000)]}, "compatibility_flags",
         f"{MAX_COMPATIBILITY_FLAGS}"),
        ({"compatibility_flags": ["f" * 1000]}, "compatibility_flags", "128 characters"),
        ({"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, "tags", f"{MAX_TAGS}"),
        ({"observability": {"x": "y" * MAX_METADATA_FIELD_BYTES}}, "observability",
         f"{MAX_METADATA_FIELD_BYTES:,}"),
        ({"placement": {"mode": "smart", "x": ["z"] * 20_000}}, "placement",
         f"{MAX_METADATA_FIELD_BYTES:,}"),
    ],
)  # fmt: skip
def test_metadata_fields_are_bounded(
    tenant: tuple[str, httpx.Client], metadata: dict[str, object], field: str, limit: str
) -> None:
    account_id, client = tenant
    status, code, message = error_of(_put(client, account_id, "w", **metadata))
    assert (status, code) == (400, 10021)
    assert f"metadata.{field}" in message and limit in message


@pytest.mark.parametrize(
    "binding",
    [
        {"name": "BIG", "type": "plain_text", "text": "x" * (MAX_VAR_BYTES + 1)},
        {"name": "BIG", "type": "json", "json": {"v": "x" * MAX_VAR_BYTES}},
        {"name": "BIG", "type": "secret_text", "text": "x" * (MAX_VAR_BYTES + 1)},
    ],
)
def test_a_var_past_5_kib_is_refused_with_cloudflares_code(
    tenant: tuple[str, httpx.Client], binding: dict[str, object]
) -> None:
    account_id, client = tenant
    status, code, message = error_of(_put(client, account_id, "w", bindings=[binding]))
    assert (status, code) == (400, 10054)
    assert "'BIG'" in message and f"{MAX_VAR_BYTES:,} bytes" in message
    assert "xxxx" not in message


def test_the_number_of_vars_and_secrets_is_bounded(
    tenant: tuple[str, httpx.Client], tmp_path: Path
) -> None:
    account_id, client = tenant
    many = [{"name": f"V{i}", "type": "plain_text", "text": "v"} for i in range(MAX_VARS)]
    assert _put(client, account_id, "w", bindings=many).status_code == 200
    one_more = [*many, {"name": "S", "type": "secret_text", "text": "s"}]
    status, code, message = error_of(_put(client, account_id, "w", bindings=one_more))
    assert (status, code) == (400, 10055) and f"at most {MAX_VARS}" in message
    with temporary_tenant(tmp_path / "temp", TEST_CONFIG) as (_platform, temp_id, temp_client):
        bindings = many[: MAX_VARS_TEMPORARY + 1]
        status, code, message = error_of(_put(temp_client, temp_id, "w", bindings=bindings))
        assert (status, code) == (400, 10055) and f"at most {MAX_VARS_TEMPORARY}" in message


def test_the_stored_metadata_stays_readable(tenant: tuple[str, httpx.Client]) -> None:
    """Within the limits, what was sent is what is stored (no truncation)."""
    account_id, client = tenant
    flags = [f"flag_{i}" for i in range(MAX_COMPATIBILITY_FLAGS)]
    assert _put(client, account_id, "w", compatibility_flags=flags).status_code == 200
    versions = client.get(f"/accounts/{account_id}/workers/scripts/w/versions").json()
    version_id = versions["result"]["items"][0]["id"]
    version = client.get(f"/accounts/{account_id}/workers/scripts/w/versions/{version_id}")
    runtime = version.json()["result"]["resources"]["script_runtime"]
    assert json.dumps(runtime["compatibility_flags"]) == json.dumps(flags)


def test_versions_stored_before_are_counted_the_same_way(tmp_path: Path) -> None:
    """The migration that adds ``stored_bytes`` computes, for older rows, what
    ``metadata_limits.stored_bytes`` computes for new ones."""
    from ember.runtime.deployments.clock import ManualClock
    from ember.runtime.deployments.multipart import parse_multipart
    from ember.runtime.deployments.plane import ControlPlane
    from ember.runtime.deployments.upload import parse_worker_upload

    state = tmp_path / "state"
    plane = ControlPlane(state, TEST_CONFIG, clock=ManualClock())
    account, _ = plane.accounts.create_permanent("acme")
    body, content_type = worker_upload(
        bindings=[
            {"name": "S", "type": "secret_text", "text": "s3cr3t"},
            {"name": "V", "type": "json", "json": {"a": "é"}},
        ],
        observability={"enabled": True},
    )
    upload = parse_worker_upload(parse_multipart(body, content_type))
    stored = plane.scripts.upload(account, "w", upload, deploy=True, source="api").version
    assert stored.stored_bytes > stored.size
    with plane.db.transaction() as conn:  # as an ember before this column left it
        conn.execute("ALTER TABLE versions DROP COLUMN stored_bytes")
        conn.execute("DROP TABLE account_claims")  # a later step's, not there yet either
        conn.execute("ALTER TABLE accounts DROP COLUMN deleted_at")  # and this one
        conn.execute("PRAGMA user_version=1")
    plane.close()
    plane = ControlPlane(state, TEST_CONFIG, clock=ManualClock())
    try:
        assert plane.scripts.versions(account, "w")[0].stored_bytes == stored.stored_bytes
    finally:
        plane.close()


def test_the_init_frame_is_measured_as_it_is_sent(tenant: tuple[str, httpx.Client]) -> None:
    """JSON vars of floats: each within 5 KiB of JSON and within the count, ~650 KB of JSON in
    all, but ~1.46 MB as the Init frame sends them (msgpack: 9 bytes a float): refused, nothing
    stored, never a version that cannot start."""
    account_id, client = tenant
    floats = [0.5] * 1270  # 5,081 bytes of JSON, 11,433 of msgpack
    bindings = [{"name": f"V{i}", "type": "json", "json": floats} for i in range(128)]
    status, code, message = error_of(_put(client, account_id, "floats", bindings=bindings))
    assert status == 400 and "Init frame" in message, message
    listed = client.get(f"/accounts/{account_id}/workers/scripts").json()["result"]
    assert "floats" not in {s["id"] for s in listed}


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"tags": [f"t{i}" for i in range(50_000)]}, "tags"),
        ({"observability": {"enabled": True, "note": "y" * 500_000}}, "observability"),
    ],
)
def test_settings_patch_is_bounded_as_an_upload_is(
    tenant: tuple[str, httpx.Client], settings: dict[str, object], field: str
) -> None:
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    url = f"/accounts/{account_id}/workers/scripts/w/script-settings"
    status, _, message = error_of(client.patch(url, json=settings))
    assert status == 400 and f"metadata.{field}" in message, message
    stored = client.get(url).json()["result"]
    assert stored.get(field) in (None, [], {}), stored  # nothing of it kept
