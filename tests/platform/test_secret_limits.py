"""Secrets are bounded (name, value, count, the worker's whole Init), and a refused change
leaves the secrets, versions and deployments as they were.

A 1,040,000-character name was accepted, the count was unbounded (each change copies every
secret into a new version), and a put answered 400 (its worker's Init past the frame limit) was
stored and made live anyway.
"""

from __future__ import annotations

import httpx
import pytest

from ember.runtime.deployments.metadata_limits import (
    MAX_BINDING_NAME,
    MAX_METADATA_FIELD_BYTES,
    MAX_VAR_BYTES,
    MAX_VARS,
)
from tests.platform.helpers import error_of, put_upload


def _put(client: httpx.Client, account_id: str, name: str, **kw: object) -> httpx.Response:
    return put_upload(client, account_id, name, **kw)


def _state(client: httpx.Client, account_id: str) -> tuple[object, ...]:
    base = f"/accounts/{account_id}/workers/scripts/w"
    return (
        client.get(f"{base}/secrets").json()["result"],
        [v["id"] for v in client.get(f"{base}/versions").json()["result"]["items"]],
        [d["id"] for d in client.get(f"{base}/deployments").json()["result"]["deployments"]],
    )


def test_secret_names_values_and_count_are_bounded(tenant: tuple[str, httpx.Client]) -> None:
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    url = f"/accounts/{account_id}/workers/scripts/w/secrets"
    before = _state(client, account_id)

    def put(name: str, text: str = "v") -> httpx.Response:
        return client.put(url, json={"name": name, "text": text, "type": "secret_text"})

    status, code, message = error_of(put("S" * 1_040_000))
    assert (status, code) == (400, 10001)
    assert f"1 to {MAX_BINDING_NAME} characters" in message and len(message) < 500
    status, code, message = error_of(put("S", "x" * (MAX_VAR_BYTES + 1)))
    assert (status, code) == (400, 10054) and f"{MAX_VAR_BYTES:,} bytes" in message
    bulk = f"/accounts/{account_id}/workers/scripts/w/secrets-bulk"
    for start in range(0, MAX_VARS, 100):
        chunk = {f"S{i}": {"text": "v"} for i in range(start, min(start + 100, MAX_VARS))}
        assert client.patch(bulk, json={"secrets": chunk}).status_code == 200
    after_bulk = _state(client, account_id)
    status, code, message = error_of(put("ONE_MORE"))
    assert (status, code) == (400, 10055) and f"at most {MAX_VARS}" in message
    assert _state(client, account_id) == after_bulk != before


def test_a_change_past_the_workers_init_frame_is_refused_before_it_is_stored(
    tenant: tuple[str, httpx.Client],
) -> None:
    """Each binding and secret within its own limit, but all together past the frame the
    worker's Init travels in: refused, and nothing of it is committed."""
    account_id, client = tenant
    big = {"v": "x" * (MAX_METADATA_FIELD_BYTES - 100)}
    bindings = [
        {"name": f"KV{i}", "type": "kv_namespace", "namespace_id": "n", **big} for i in range(80)
    ]
    namespace = client.post(
        f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "n"}
    ).json()["result"]["id"]
    for binding in bindings:
        binding["namespace_id"] = namespace
    status, code, message = error_of(_put(client, account_id, "w", bindings=bindings))
    assert (status, code) == (400, 10021) and "Init" in message and "frame" in message
    assert client.get(f"/accounts/{account_id}/workers/scripts").json()["result"] == []

    assert _put(client, account_id, "w", bindings=bindings[:60]).status_code == 200
    before = _state(client, account_id)
    url = f"/accounts/{account_id}/workers/scripts/w/secrets-bulk"
    secrets = {f"S{i}": {"text": "x" * MAX_VAR_BYTES} for i in range(60)}
    status, code, message = error_of(client.patch(url, json={"secrets": secrets}))
    assert (status, code) == (400, 10021) and "Init" in message
    assert _state(client, account_id) == before


def test_a_version_past_the_new_count_can_shed_secrets(tmp_path) -> None:  # noqa: ANN001
    """A version stored before the count limit (an older ember took 100 secrets in a bulk) must
    be able to lose secrets one change at a time: a change that grows neither the count nor the
    Init is never refused; one that adds a secret still is."""
    from ember.runtime.deployments.clock import ManualClock
    from ember.runtime.deployments.errors import TooManyVars
    from ember.runtime.deployments.metadata_limits import MAX_VARS_TEMPORARY
    from ember.runtime.deployments.plane import ControlPlane
    from ember.runtime.deployments.records import SecretValue
    from tests.platform.test_store import CONFIG, temporary, upload

    plane = ControlPlane(tmp_path / "state", CONFIG, clock=ManualClock())
    try:
        account = temporary(plane).account
        plane.scripts.upload(account, "w", upload(), deploy=True, source="api")
        legacy = MAX_VARS_TEMPORARY + 36
        with plane.db.transaction() as conn:  # what an older ember stored
            (version_id,) = conn.execute("SELECT id FROM versions").fetchone()
            conn.executemany(
                "INSERT INTO version_secrets VALUES (?, ?, 'secret_text', 'x')",
                [(version_id, f"S{i}") for i in range(legacy)],
            )
        plane.secrets.delete(account, "w", "S0", "api")
        plane.secrets.patch(account, "w", {f"S{i}": None for i in range(1, 11)}, "api")
        plane.secrets.put(account, "w", SecretValue("S11", "secret_text", "y"), "api")
        names = {name for name, _ in plane.secrets.list(account, "w")}
        assert len(names) == legacy - 11 and "S0" not in names and "S11" in names
        with pytest.raises(TooManyVars):  # growing past the limit is still refused
            plane.secrets.put(account, "w", SecretValue("NEW", "secret_text", "z"), "api")
    finally:
        plane.close()
