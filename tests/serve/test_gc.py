"""Unclaimed temporary accounts are deleted at expiry, and nothing of them remains on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.serve.conftest import ServeProcess, permanent_account, put_worker, temporary_account

CONFIG = """\
platform:
  proof_of_work: {k: 64, g: 64, sample: 8}
  temporary: {ttl: 4s, kv_writes_per_day: 100000}  # the sweep's test writes 30,000 keys
"""
WORKER = """\
from workers import Response

async def on_fetch(request, env):
    print("marker-console-line-5150")
    await env.KV.put("from-binding", "marker-binding-value-2323")
    return Response("alive " + env.SECRET[:3])
"""


def test_expired_account_is_deleted_with_everything(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path / "state", CONFIG, "--gc-interval", "0.5", "--housekeeping-interval", "0.2"
    )
    try:
        created = temporary_account(serve)
        account = created["account"]  # type: ignore[index]
        account_id, name, token = account["id"], account["name"], account["apiToken"]  # type: ignore[index]
        worker = "marker-worker-7777"
        with serve.api(token) as api:
            namespace = api.post(
                f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "marker-ns-title"}
            ).json()["result"]["id"]
            put = put_worker(
                api,
                account_id,
                worker,
                WORKER,
                bindings=[
                    {"name": "KV", "type": "kv_namespace", "namespace_id": namespace},
                    {"name": "SECRET", "type": "secret_text", "text": "marker-secret-9191"},
                ],
            )
            assert put.status_code == 200, put.text
            assert (
                api.put(
                    f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values/rest-key",
                    content=b"marker-rest-value-4646",
                ).status_code
                == 200
            )
            tail = api.post(
                f"/accounts/{account_id}/workers/scripts/{worker}/tails", content="{}"
            ).json()["result"]
        with connect(tail["url"], subprotocols=["trace-v1"], open_timeout=30) as socket:
            socket.send(json.dumps({"debug": False}))
            assert serve.worker(name, worker).text == "alive mar"
            assert "marker-console-line-5150" in socket.recv(timeout=30)
            deadline = time.monotonic() + 30
            while f"deleted expired temporary account {account_id}" not in serve.output():
                assert time.monotonic() < deadline, serve.output()
                time.sleep(0.1)
            with pytest.raises(ConnectionClosed):  # the tail ended with its worker
                socket.recv(timeout=10)
        assert serve.worker(name, worker).status_code == 404
        with serve.api(token) as api:
            refused = api.get(f"/accounts/{account_id}/workers/scripts")
            assert refused.status_code == 401
        markers = [
            account_id, name, worker, namespace, token, "marker-ns-title", "marker-secret-9191",
            "marker-rest-value-4646", "marker-binding-value-2323", "marker-console-line-5150",
            "marker-worker-7777",
        ]  # fmt: skip
        serve.stop()
        leftovers = {
            str(path.relative_to(serve.state_dir)): [m for m in markers if m.encode() in data]
            for path in serve.state_dir.rglob("*")
            if path.is_file() and (data := path.read_bytes())
        }
        assert {path: found for path, found in leftovers.items() if found} == {}
        assert not (serve.state_dir / "accounts" / account_id).exists()
    finally:
        serve.stop()


HONEST = """\
from workers import Response

async def on_fetch(request, env):
    return Response("honest")
"""


def test_other_tenants_are_answered_while_an_expired_account_is_deleted(tmp_path: Path) -> None:
    """The sweep of an account with many rows runs in batches off the event loop: a loop of
    another tenant's requests (its worker, and its KV over the API) is answered all along. The
    longest gap is printed for whoever reads the log; only answers are asserted."""
    serve = ServeProcess(
        tmp_path / "state", CONFIG, "--gc-interval", "0.5", "--housekeeping-interval", "0.2"
    )
    try:
        honest_id, honest_token = permanent_account(serve, "honest")
        with serve.api(honest_token) as api:
            assert put_worker(api, honest_id, "shop", HONEST).status_code == 200
            honest_ns = api.post(
                f"/accounts/{honest_id}/storage/kv/namespaces", json={"title": "h"}
            ).json()["result"]["id"]
        created = temporary_account(serve)
        account = created["account"]  # type: ignore[index]
        account_id, token = account["id"], account["apiToken"]  # type: ignore[index]
        with serve.api(token) as api:
            namespace = api.post(
                f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "many"}
            ).json()["result"]["id"]
            for part in range(3):  # 30,000 rows: ~120 batches of the sweep
                bulk = [{"key": f"k{part}-{i}", "value": "v"} for i in range(10_000)]
                put = api.put(
                    f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/bulk", json=bulk
                )
                assert put.status_code == 200, put.text
        answers: list[tuple[int, int]] = []
        longest = 0.0
        deadline = time.monotonic() + 60
        with serve.api(honest_token) as api:
            while f"deleted expired temporary account {account_id}" not in serve.output():
                assert time.monotonic() < deadline, serve.output()
                started = time.monotonic()
                worker = serve.worker("honest", "shop")
                kv = api.put(
                    f"/accounts/{honest_id}/storage/kv/namespaces/{honest_ns}/values/k",
                    content=b"v",
                )
                answers.append((worker.status_code, kv.status_code))
                longest = max(longest, time.monotonic() - started)
        print(f"{len(answers)} honest rounds during the sweep; longest {longest:.3f}s")
        assert answers and set(answers) == {(200, 200)}
    finally:
        serve.stop()
