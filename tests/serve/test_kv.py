"""KV values over REST on ember serve: one store with the workers' ``env.KV``."""

from __future__ import annotations

from urllib.parse import quote

from ember.bindings.kv.store import KVStore
from tests.serve.conftest import ServeProcess, permanent_account, put_worker

WORKER = """\
from workers import Response

async def on_fetch(request, env):
    key = request.url.rsplit("/", 1)[1]
    if request.method == "PUT":
        await env.KV.put(key, await request.text(), metadata={"by": "worker"})
        return Response("stored")
    value = await env.KV.get(key)
    return Response(str(value), status=200 if value is not None else 404)
"""


def test_rest_and_binding_share_one_store(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "kvshare")
    with serve.api(token) as api:
        ns = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"}).json()
        namespace = ns["result"]["id"]
        binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "kv", WORKER, bindings=binding).status_code == 200
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"

        # REST writes (raw, as wrangler does), the worker reads.
        assert api.put(
            f"{values}/from-rest",
            content=b"rest value",
            headers={"content-type": "text/plain;charset=UTF-8"},
        ).json() == {"success": True, "errors": [], "messages": [], "result": {}}
        assert serve.worker("kvshare", "kv", "/from-rest").text == "rest value"
        # The worker writes, REST reads the bytes and the metadata.
        put = serve.worker("kvshare", "kv", "/from-worker", method="PUT", content=b"w value")
        assert put.text == "stored"
        got = api.get(f"{values}/from-worker")
        assert got.status_code == 200 and got.content == b"w value"
        meta = api.get(f"{values.rsplit('/', 1)[0]}/metadata/from-worker")
        assert meta.json()["result"] == {"by": "worker"}


def test_values_multipart_metadata_keys_bulk_and_errors(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "kvapi")
    _, other_token = permanent_account(serve, "kvother")
    with serve.api(token) as api:
        namespace = api.post(
            f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "vals"}
        ).json()["result"]["id"]
        base = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}"
        key = "dir/k:1"
        # The SDK's multipart form: part "value" (a file) and part "metadata" (JSON).
        put = api.put(
            f"{base}/values/{quote(key, safe='')}",
            files={
                "value": ("upload", b"\x00binary\xff", "application/octet-stream"),
                "metadata": (None, '{"a": 1}', "application/json"),
            },
        )
        assert put.status_code == 200, put.text
        assert api.get(f"{base}/values/{quote(key, safe='')}").content == b"\x00binary\xff"
        assert api.get(f"{base}/values/{key}").content == b"\x00binary\xff"  # raw slashes too
        assert api.get(f"{base}/metadata/{quote(key, safe='')}").json()["result"] == {"a": 1}

        bulk = api.put(
            f"{base}/bulk",
            json=[{"key": f"b{i}", "value": str(i)} for i in range(3)]
            + [{"key": "b64", "value": "aGk=", "base64": True}],
        )
        assert bulk.json()["result"]["successful_key_count"] == 4
        page = api.get(f"{base}/keys", params={"prefix": "b", "limit": 2}).json()
        assert [k["name"] for k in page["result"]] == ["b0", "b1"]
        rest = api.get(
            f"{base}/keys", params={"prefix": "b", "cursor": page["result_info"]["cursor"]}
        ).json()
        assert [k["name"] for k in rest["result"]] == ["b2", "b64"]
        assert rest["result_info"]["cursor"] == ""
        got = api.post(f"{base}/bulk/get", json={"keys": ["b1", "b64", "nope"]}).json()
        assert got["result"]["values"] == {"b1": "1", "b64": "hi", "nope": None}
        assert api.post(f"{base}/bulk/delete", json=["b0", "b1"]).json()["success"]
        assert api.delete(f"{base}/values/b2").json()["success"]
        assert [k["name"] for k in api.get(f"{base}/keys").json()["result"]] == ["b64", key]

        missing = api.get(f"{base}/values/absent")
        assert missing.status_code == 404 and missing.json()["errors"][0]["code"] == 10009
        too_long = api.put(f"{base}/values/{'x' * 600}", content=b"v")
        assert too_long.status_code == 414 and "exceeds key length limit" in too_long.text
        bad_ttl = api.put(f"{base}/values/t", params={"expiration_ttl": 5}, content=b"v")
        assert bad_ttl.status_code == 400 and "at least 60" in bad_ttl.text
        no_value = api.put(f"{base}/values/t", files={"metadata": (None, "{}", "application/json")})
        assert no_value.status_code == 400 and "'value' part" in no_value.text
    with serve.api(other_token) as other:
        # Another account's token: 403 on this account's path, nothing about it in the error.
        refused = other.get(f"{base}/values/b64")
        assert refused.status_code == 403 and namespace not in refused.text


GUARDED = """\
from workers import Response

async def on_fetch(request, env):
    key = request.url.rsplit("/", 1)[1]
    try:
        await env.KV.put(key, "x" * 1000)
    except Exception as exc:
        return Response(str(exc), status=409)
    return Response("stored")
"""


def test_a_deleted_namespace_takes_no_more_writes_from_a_running_worker(
    serve: ServeProcess,
) -> None:
    """The binding used to write on into a deleted namespace (its isolate still running),
    outside every account's quota and out of reach of GC: the data outlived the account."""
    account_id, token = permanent_account(serve, "kvgone")
    with serve.api(token) as api:
        ns = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "t"}).json()
        namespace = ns["result"]["id"]
        binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "kv", GUARDED, bindings=binding).status_code == 200
        assert serve.worker("kvgone", "kv", "/before").text == "stored"
        assert api.delete(f"/accounts/{account_id}/storage/kv/namespaces/{namespace}").json()[
            "success"
        ]
        refused = serve.worker("kvgone", "kv", "/after")
        assert refused.status_code == 409 and "does not exist" in refused.text
    store = KVStore(serve.state_dir / "kv.sqlite3")
    try:
        assert store.list(namespace).keys == ()
    finally:
        store.close()


TWICE = """\
from workers import Response

async def on_fetch(request, env):
    key = request.url.rsplit("/", 1)[1]
    outcomes = []
    for value in ("first", "second"):
        try:
            await env.KV.put(key, value)
            outcomes.append("ok")
        except Exception as exc:
            outcomes.append(str(exc))
    return Response("|".join(outcomes) + "|" + str(await env.KV.get(key)))
"""


def test_one_binding_write_per_second_per_key_but_rest_is_not_held_to_it(
    serve: ServeProcess,
) -> None:
    account_id, token = permanent_account(serve, "kvrate")
    with serve.api(token) as api:
        ns = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "r"}).json()
        namespace = ns["result"]["id"]
        binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "twice", TWICE, bindings=binding).status_code == 200
        # Two writes of one key back to back: the second is Cloudflare's 429, nothing changed.
        answer = serve.worker("kvrate", "twice", "/k").text
        assert answer == "ok|KV PUT failed: 429 Too Many Requests|first"
        # The REST API is bounded by the API's own rate limit, not the key's (KV FAQ).
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        for value in (b"r1", b"r2", b"r3"):
            assert api.put(f"{values}/rest", content=value).status_code == 200
        assert api.get(f"{values}/rest").content == b"r3"
