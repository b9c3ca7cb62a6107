"""A hostile tenant's input to the client/v4 API: refused with a 400 envelope naming what was
wrong, never a 500, and never stored in a shape that breaks the tenant's later reads.

Each case here was a 500 (or worse) before: a lone surrogate escape or NaN stored and then
unanswerable, JSON nested past the recursion limit, module names that cannot form one directory
tree, and a KV expiry past SQLite's integers (tails: test_tail_hostile.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from ember.runtime.deployments.multipart import Part, build_multipart
from ember.runtime.deployments.upload import MAX_ANNOTATION_CHARS
from ember.runtime.deployments.writes import DEPLOYMENTS_KEPT
from tests.platform.conftest import TEST_CONFIG, worker_upload
from tests.platform.helpers import error_of, put_upload, temporary_tenant

WRANGLER = {"user-agent": "wrangler/4.164.0"}


def _put(client: httpx.Client, account_id: str, name: str, **kw: object) -> httpx.Response:
    return put_upload(client, account_id, name, headers=WRANGLER, **kw)


def _namespace(client: httpx.Client, account_id: str) -> str:
    reply = client.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "n"})
    return reply.json()["result"]["id"]


def test_json_nested_past_the_recursion_limit_is_a_400(
    tenant: tuple[str, httpx.Client],
) -> None:
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    deep = b"[" * 100_000 + b"]" * 100_000
    for method, path in [
        ("POST", "/storage/kv/namespaces"),
        ("PUT", "/workers/scripts/w/secrets"),
        ("POST", "/workers/scripts/w/tails"),
        ("POST", "/workers/scripts/w/deployments"),
    ]:
        reply = client.request(method, f"/accounts/{account_id}{path}", content=deep)
        status, code, message = error_of(reply)
        assert (status, code) == (400, 10001), (path, message)
        assert "nested too deeply" in message
    body, content_type = worker_upload()
    body = body.replace(
        b'{"main_module"', b'{"x": ' + b"[" * 50_000 + b"]" * 50_000 + b', "main_module"'
    )
    reply = client.put(
        f"/accounts/{account_id}/workers/scripts/w2",
        content=body,
        headers={"content-type": content_type},
    )
    status, code, message = error_of(reply)
    assert (status, code) == (400, 10021) and "'metadata' part" in message


def test_lone_surrogates_and_nan_are_refused_not_stored(
    tenant: tuple[str, httpx.Client],
) -> None:
    """Python's json takes "\\ud800" and NaN; stored, they made every later read of the worker's
    versions or settings a 500. They are refused at the door now, and the reads keep working."""
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    script = f"/accounts/{account_id}/workers/scripts/w"
    cases = [
        ("PATCH", f"{script}/script-settings", b'{"tags": ["\\ud800"]}'),
        ("PATCH", f"{script}/script-settings", b'{"observability": {"head_sampling_rate": NaN}}'),
        (
            "PUT",
            f"{script}/secrets",
            b'{"name": "TOKEN", "text": "\\udfff", "type": "secret_text"}',
        ),
        ("POST", f"/accounts/{account_id}/storage/kv/namespaces", b'{"title": "a\\ud83d"}'),
    ]
    for method, path, raw in cases:
        status, code, message = error_of(client.request(method, path, content=raw))
        assert (status, code) == (400, 10001), (raw, message)
        assert "not valid JSON" in message
    body, content_type = worker_upload(annotations={"workers/message": "PLACEHOLDER"})
    body = body.replace(b"PLACEHOLDER", b"\\ud800")
    reply = client.post(f"{script}/versions", content=body, headers={"content-type": content_type})
    assert error_of(reply)[:2] == (400, 10021)
    for path in (
        f"{script}/versions",
        f"{script}/settings",
        f"/accounts/{account_id}/storage/kv/namespaces",
    ):
        assert client.get(path).status_code == 200, path


def test_kv_metadata_with_a_lone_surrogate_never_breaks_listing(
    tenant: tuple[str, httpx.Client],
) -> None:
    account_id, client = tenant
    namespace = _namespace(client, account_id)
    base = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}"
    boundary = "b0undary"
    body = build_multipart(
        [
            Part("value", "upload", "application/octet-stream", b"v"),
            Part("metadata", None, "application/json", b'{"who": "\\ud800"}'),
        ],
        boundary,
    )
    reply = client.put(
        f"{base}/values/k",
        content=body,
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    status, code, message = error_of(reply)
    assert (status, code) == (400, 10001) and "Metadata must be valid JSON" in message
    bulk = b'[{"key": "k2", "value": "v", "metadata": {"who": "\\udc00"}}]'
    assert error_of(client.put(f"{base}/bulk", content=bulk))[0] == 400
    listed = client.get(f"{base}/keys")
    assert listed.status_code == 200 and listed.json()["result"] == []


def test_kv_expiry_past_sqlite_integers_is_a_400(tenant: tuple[str, httpx.Client]) -> None:
    account_id, client = tenant
    base = f"/accounts/{account_id}/storage/kv/namespaces/{_namespace(client, account_id)}"
    for query in ("expiration=" + "9" * 30, "expiration_ttl=" + "9" * 30):
        status, code, message = error_of(client.put(f"{base}/values/k?{query}", content=b"v"))
        assert (status, code) == (400, 10001) and "at most" in message, query
    items = [{"key": "k", "value": "v", "expiration_ttl": 1e300}]
    status, _, message = error_of(client.put(f"{base}/bulk", json=items))
    assert status == 400 and "expiration_ttl" in message
    assert client.get(f"{base}/keys").json()["result"] == []


def test_kv_bulk_get_as_json_of_a_text_value_is_a_400(tenant: tuple[str, httpx.Client]) -> None:
    account_id, client = tenant
    base = f"/accounts/{account_id}/storage/kv/namespaces/{_namespace(client, account_id)}"
    assert client.put(f"{base}/values/plain", content=b"not json").status_code == 200
    reply = client.post(f"{base}/bulk/get", json={"keys": ["plain"], "type": "json"})
    status, code, message = error_of(reply)
    assert (status, code) == (400, 10001) and "'plain'" in message and '"text"' in message
    reply = client.post(f"{base}/bulk/get", json={"keys": ["plain"], "type": "text"})
    assert reply.json()["result"]["values"] == {"plain": "not json"}


def test_namespace_rename_is_bounded_like_create(tenant: tuple[str, httpx.Client]) -> None:
    account_id, client = tenant
    namespace = _namespace(client, account_id)
    reply = client.put(
        f"/accounts/{account_id}/storage/kv/namespaces/{namespace}", json={"title": "x" * 600_000}
    )
    assert error_of(reply)[:2] == (400, 10001)


@pytest.mark.parametrize(
    "modules",
    [
        ["lib", "lib/inner.py"],  # a file, then a module that needs it to be a directory
        ["lib/inner.py", "lib"],
        ["a" * 300 + ".py"],  # longer than a file name may be
    ],
)
def test_modules_that_cannot_form_one_directory_tree_are_refused(
    tenant: tuple[str, httpx.Client], modules: list[str]
) -> None:
    account_id, client = tenant
    extra = [Part(name, name, "text/x-python", b"x = 1\n") for name in modules]
    status, code, message = error_of(_put(client, account_id, "tree", extra_parts=extra))
    assert (status, code) == (400, 10021)
    assert "module" in message and ("directory" in message or "255 bytes" in message)


def test_a_temporary_account_stores_a_bounded_number_of_versions(tmp_path: Path) -> None:
    """Workers and script size were capped, but every redeploy and secret change stored one
    more version (up to max_script_size each, in the database and on disk) without end."""
    config = replace(TEST_CONFIG, temporary=replace(TEST_CONFIG.temporary, max_versions=3))
    with temporary_tenant(tmp_path / "state", config) as (_platform, account_id, client):
        assert _put(client, account_id, "one").status_code == 200
        assert _put(client, account_id, "two").status_code == 200
        secret = {"name": "TOKEN", "text": "s3", "type": "secret_text"}
        put = client.put(f"/accounts/{account_id}/workers/scripts/one/secrets", json=secret)
        assert put.status_code == 200
        for refused in (
            _put(client, account_id, "two"),
            client.put(f"/accounts/{account_id}/workers/scripts/two/secrets", json=secret),
        ):
            status, code, message = error_of(refused)
            assert (status, code) == (403, 10037) and "at most 3" in message
        live = client.get(f"/accounts/{account_id}/workers/scripts/two/versions")
        assert len(live.json()["result"]["items"]) == 1  # the refused ones left nothing
        assert client.delete(f"/accounts/{account_id}/workers/scripts/one").status_code == 200
        assert _put(client, account_id, "two").status_code == 200


def test_a_malformed_secret_binding_is_not_echoed_in_the_error(
    tenant: tuple[str, httpx.Client],
) -> None:
    """wrangler prints the error into (CI) logs: the secret's text must not be in it."""
    account_id, client = tenant
    binding = {"type": "secret_text", "text": "hunter2-do-not-print"}
    status, code, message = error_of(_put(client, account_id, "w", bindings=[binding]))
    assert (status, code) == (400, 10021)
    assert "hunter2" not in message and "'secret_text'" in message and "'text'" in message


def test_deployments_and_their_messages_are_bounded(tenant: tuple[str, httpx.Client]) -> None:
    """Re-deploying the live version is one cheap request, and its message was stored whole:
    a loop of them grew the database without end."""
    account_id, client = tenant
    assert _put(client, account_id, "w").status_code == 200
    base = f"/accounts/{account_id}/workers/scripts/w/deployments"
    version = client.get(base).json()["result"]["deployments"][0]["versions"][0]["version_id"]

    def deploy(message: str) -> httpx.Response:
        return client.post(
            base,
            json={
                "strategy": "percentage",
                "versions": [{"version_id": version, "percentage": 100}],
                "annotations": {"workers/message": message},
            },
        )

    status, code, message = error_of(deploy("m" * (MAX_ANNOTATION_CHARS + 1)))
    assert (status, code) == (400, 10001) and "workers/message" in message
    status, code, _ = error_of(
        _put(client, account_id, "w", annotations={"workers/tag": "t" * 5000})
    )
    assert (status, code) == (400, 10021)
    for i in range(DEPLOYMENTS_KEPT + 5):
        assert deploy(f"deploy {i}").status_code == 200
    kept = client.get(base).json()["result"]["deployments"]
    assert len(kept) == DEPLOYMENTS_KEPT
    assert kept[0]["annotations"]["workers/message"] == f"deploy {DEPLOYMENTS_KEPT + 4}"
