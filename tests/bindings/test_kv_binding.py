"""``env.KV`` from a handler: every operation, big values both ways, the platform's errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.runtime.harness import Harness, write_project

WORKER = """
import json
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        kv = self.env.KV
        op = request.headers.get("x-op")
        key = request.headers.get("x-key", "k")
        if op == "put":
            meta = request.headers.get("x-meta")
            await kv.put(key, await request.bytes(), metadata=json.loads(meta) if meta else None,
                         expiration_ttl=int(request.headers.get("x-ttl", "0")) or None)
            return Response("ok")
        if op == "put-stream":
            async def chunks():
                for i in range(int(request.headers["x-chunks"])):
                    yield bytes([65 + i % 26]) * 65536
            await kv.put(key, chunks())
            return Response("ok")
        if op == "get":
            value = await kv.get(key, type=request.headers.get("x-type", "text"))
            if value is None:
                return Response("missing", status=404)
            if isinstance(value, bytes):
                return Response(value)
            if request.headers.get("x-type") == "json":
                return Response.json({"name": value.name, "raw": value})
            if request.headers.get("x-type") == "stream":
                return Response(value)
            return Response(value)
        if op == "meta":
            result = await kv.getWithMetadata(key)
            return Response.json({"value": result.value, "metadata": result.metadata})
        if op == "delete":
            await kv.delete(key)
            return Response("deleted")
        if op == "list":
            headers = request.headers
            page = await kv.list(prefix=headers.get("x-prefix"), cursor=headers.get("x-cursor"),
                                 limit=int(headers.get("x-limit", "1000")))
            return Response.json(page)
        if op == "bad":
            try:
                await kv.put("x" * 600, "v")
            except Exception as exc:
                return Response(f"{type(exc).__name__}: {exc}")
        if op == "type":
            try:
                await kv.get("k", type="blob")
            except TypeError as exc:
                return Response(str(exc))
        return Response("unknown op", status=400)
"""


@pytest.fixture(scope="module")
def kv(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = write_project(
        tmp_path_factory.mktemp("kv") / "kvtest", WORKER, "kv_namespaces:\n  - binding: KV\n"
    )
    return harness.deploy(root)


def test_put_get_in_every_type_and_delete(harness: Harness, kv: str) -> None:
    with harness.client(kv) as c:
        assert c.get("/", headers={"x-op": "get", "x-key": "nope"}).status_code == 404
        c.post(
            "/",
            content=b'{"name": "ember"}',
            headers={"x-op": "put", "x-key": "j", "x-meta": '{"v": 1}'},
        )
        assert c.get("/", headers={"x-op": "get", "x-key": "j"}).text == '{"name": "ember"}'
        assert c.get("/", headers={"x-op": "get", "x-key": "j", "x-type": "json"}).json() == {
            "name": "ember",
            "raw": {"name": "ember"},
        }
        assert (
            c.get("/", headers={"x-op": "get", "x-key": "j", "x-type": "arrayBuffer"}).content
            == b'{"name": "ember"}'
        )
        assert (
            c.get("/", headers={"x-op": "get", "x-key": "j", "x-type": "stream"}).text
            == '{"name": "ember"}'
        )
        assert c.get("/", headers={"x-op": "meta", "x-key": "j"}).json() == {
            "value": '{"name": "ember"}',
            "metadata": {"v": 1},
        }
        # A delete writes the key: within a second of its put it is Cloudflare's 429.
        deleted = c.get("/", headers={"x-op": "delete", "x-key": "j"}).text
        while "KV DELETE failed: 429 Too Many Requests" in deleted:
            time.sleep(0.1)
            deleted = c.get("/", headers={"x-op": "delete", "x-key": "j"}).text
        assert deleted == "deleted"
        assert c.get("/", headers={"x-op": "get", "x-key": "j"}).status_code == 404


def test_large_values_upload_and_stream_back(harness: Harness, kv: str) -> None:
    with harness.client(kv) as c:
        assert (
            c.get("/", headers={"x-op": "put-stream", "x-key": "big", "x-chunks": "48"}).text
            == "ok"
        )
        streamed = c.get("/", headers={"x-op": "get", "x-key": "big", "x-type": "stream"}).content
        whole = c.get("/", headers={"x-op": "get", "x-key": "big", "x-type": "bytes"}).content
        payload = (
            bytes(range(256)) * 8192
        )  # 2 MiB through the request body and an inline-too-large put
        c.post("/", content=payload, headers={"x-op": "put", "x-key": "bin"})
        back = c.get("/", headers={"x-op": "get", "x-key": "bin", "x-type": "bytes"}).content
    expected = b"".join(bytes([65 + i % 26]) * 65536 for i in range(48))
    assert streamed == expected and whole == expected
    assert back == payload


def test_list_with_prefix_cursor_and_expiration(harness: Harness, kv: str) -> None:
    with harness.client(kv) as c:
        for i in range(5):
            c.post(
                "/", content=b"x", headers={"x-op": "put", "x-key": f"user:{i}", "x-ttl": "3600"}
            )
        c.post("/", content=b"x", headers={"x-op": "put", "x-key": "other"})
        first = c.get("/", headers={"x-op": "list", "x-prefix": "user:", "x-limit": "3"}).json()
        rest = c.get(
            "/", headers={"x-op": "list", "x-prefix": "user:", "x-cursor": first["cursor"]}
        ).json()
    assert [k["name"] for k in first["keys"]] == ["user:0", "user:1", "user:2"]
    assert first["list_complete"] is False
    assert [k["name"] for k in rest["keys"]] == ["user:3", "user:4"] and rest[
        "list_complete"
    ] is True
    assert all(isinstance(k["expiration"], int) for k in first["keys"])


def test_errors_reach_the_handler_with_the_platform_message(harness: Harness, kv: str) -> None:
    with harness.client(kv) as c:
        assert c.get("/", headers={"x-op": "bad"}).text == (
            "ServiceError: KV PUT failed: 414 "
            "UTF-8 encoded length of 600 exceeds key length limit of 512."
        )
        assert c.get("/", headers={"x-op": "type"}).text.startswith("Unknown response type.")


# Keys of its own: the harness's deployments share a namespace, and a key takes one write a second.
BULK = """
from workers import Response

async def fetch(request, env, ctx):
    kv = env.KV
    await kv.put("ba", "text value", metadata={"n": 1})
    await kv.put("bj", '{"name": "json"}')
    await kv.put("bbig", "x" * (300 * 1024))
    texts = await kv.get(["ba", "missing", "bbig"])
    parsed = await kv.get(["bj"], type="json")
    with_meta = await kv.get_with_metadata(["ba", "missing"])
    errors = []
    for keys, kind in ((["ba"] * 101, "text"), ([], "text"), (["ba"], "arrayBuffer"),
                       (["ba"], "json")):
        try:
            await kv.get(keys, type=kind)
        except Exception as exc:
            errors.append(str(exc))
    return Response.json({
        "texts": [texts["ba"], texts["missing"], len(texts["bbig"]), list(texts)],
        "json": parsed["bj"].name,
        "meta": [with_meta["ba"].value, with_meta["ba"].metadata.n, with_meta["missing"]],
        "errors": errors,
    })
"""


def test_bulk_get_reads_up_to_100_keys_as_workers_kv_does(harness: Harness, tmp_path: Path) -> None:
    root = write_project(tmp_path / "bulk", BULK, "kv_namespaces:\n  - binding: KV\n")
    with harness.client(harness.deploy(root)) as client:
        answer = client.get("/").json()
    assert answer["texts"] == ["text value", None, 300 * 1024, ["ba", "missing", "bbig"]]
    assert answer["json"] == "json"
    assert answer["meta"] == ["text value", 1, None]
    assert answer["errors"] == [
        "KV GET_BULK failed: 400 You can request a maximum of 100 keys",
        "KV GET_BULK failed: 400 You must request a minimum of 1 key",
        'KV GET_BULK failed: 400 "arrayBuffer" is not a valid type. Use "json" or "text"',
        "KV GET_BULK failed: 400 At least one of the requested keys corresponds to a "
        "non-json value",
    ]
