"""A full disk on ``ember serve``: deploys, secrets and KV writes are refused with one clear
error (507, nothing written), the operator's log says so in one line per refusal with no
traceback, and ``/health`` reports the failing store until a write of it succeeds.

How the disk is made full without root: ``ember serve --storage-max-pages 1`` caps each of the
platform's SQLite stores (``PRAGMA max_page_count``) at the pages it holds at start. A write that
needs one more page then fails inside SQLite with SQLITE_FULL, "database or disk is full": the
very error, raised at the very place, that a full file system gives, so everything from there up
(the mapping, the answers, the log, /health) runs as it would on a full disk. A read-only
directory would not do: SQLite keeps its open files writable and fails later, with other codes.
The writes here are each larger than a page (60 KB), so none fits in an existing page's slack.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.serve.conftest import ServeProcess, permanent_account, put_worker

FULL = "the platform's storage is full: nothing was written; try again later"
PADDING = "# " + "x" * 60_000 + "\n"  # a module larger than any page: its copy needs new pages
WORKER = (
    """\
from workers import Response

async def on_fetch(request, env):
    try:
        await env.KV.put("from-worker", "y" * 60000)
    except Exception as exc:
        return Response(str(exc), status=500)
    return Response("stored")
"""
    + PADDING
)


def test_a_full_disk_refuses_writes_clearly_and_health_says_so(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        account_id, token = permanent_account(serve, "acme")
        with serve.api(token) as api:
            namespace = api.post(
                f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "data"}
            ).json()["result"]["id"]
            kv = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
            assert put_worker(api, account_id, "app", WORKER, bindings=kv).status_code == 200
            values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
            assert api.put(f"{values}/small", content=b"s").status_code == 200
        serve.stop()
        serve.extra = ("--storage-max-pages", "1")
        serve.start()
        assert httpx.get(serve.url + "/health", timeout=30).json()["status"] == "ok"

        script = f"/accounts/{account_id}/workers/scripts/app"
        with serve.api(token) as api:
            deployed = put_worker(api, account_id, "app", WORKER + "# v2\n", bindings=kv)
            secret = api.put(
                f"{script}/secrets", json={"name": "S", "text": "v", "type": "secret_text"}
            )
            kv_put = api.put(f"{values}/big", content=b"z" * 60_000)
            versions = api.get(f"{script}/versions").json()["result"]["items"]
        from_worker = serve.worker("acme", "app")
        for reply in (deployed, secret, kv_put):
            assert reply.status_code == 507, reply.text
            assert reply.json()["errors"][0]["message"] == FULL, reply.text
        assert len(versions) == 1  # nothing was written
        assert from_worker.status_code == 500 and FULL in from_worker.text, from_worker.text

        health = httpx.get(serve.url + "/health", timeout=30).json()
        assert health["status"] == "degraded", health
        failing = {item["store"]: item for item in health["storage"]["failures"]}
        assert set(failing) == {"control-plane database", "KV store"}, health
        assert failing["control-plane database"]["failed_writes"] == 2
        assert failing["KV store"]["failed_writes"] == 2
        assert all(item["error"] == "database or disk is full" for item in failing.values())
        assert all(item["since"].endswith("Z") for item in failing.values())

        log = serve.output()
        assert log.count("storage full:") == 4, log
        assert "Traceback" not in log and "Exception in ASGI application" not in log, log

        # A write that needs no new page succeeds (a delete): that store is healthy again.
        with serve.api(token) as api:
            assert api.delete(f"{values}/small").status_code == 200
            after_kv = httpx.get(serve.url + "/health", timeout=30).json()
            assert api.delete(script).status_code == 200
        after_both = httpx.get(serve.url + "/health", timeout=30).json()
        stores = [item["store"] for item in after_kv["storage"]["failures"]]
        assert after_kv["status"] == "degraded" and stores == ["control-plane database"]
        assert after_both["status"] == "ok" and after_both["storage"] == {"failures": []}
    finally:
        serve.stop()
