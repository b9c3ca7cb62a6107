"""``kill -9`` of the platform during a deploy and during KV writes: after a restart, every
acknowledged change is there and no half-made version is live."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from tests.serve.conftest import ServeProcess, answer, permanent_account, put_worker

# Its module takes a while to load, so a deploy of it spends that long between storing the
# version and committing the deployment: the window the kill lands in.
SLOW_TO_START = "import time\ntime.sleep(2.0)\n" + answer("two")
KV_WORKER = """\
from workers import Response

async def on_fetch(request, env):
    key = request.url.rsplit("/", 1)[1]
    await env.KV.put(key, await request.text())
    return Response("ok")
"""


def _live(serve: ServeProcess, account_id: str, name: str) -> tuple[str, list[str]]:
    plane = serve.plane()
    try:
        account = plane.accounts.get(account_id)
        live = plane.scripts.live(account, name)
        versions = [v.id for v in plane.scripts.versions(account, name)]
    finally:
        plane.close()
    assert live is not None
    return live.versions[0].version_id, versions


def test_kill_during_a_deploy_keeps_the_acknowledged_version(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        account_id, token = permanent_account(serve, "faulty")
        with serve.api(token) as api:
            first = put_worker(api, account_id, "app", answer("one"))
            v1 = first.json()["result"]["deployment_id"]
        replies: list[object] = []

        def deploy_slow() -> None:
            try:
                with serve.api(token) as api:
                    replies.append(put_worker(api, account_id, "app", SLOW_TO_START))
            except httpx.HTTPError as exc:
                replies.append(exc)

        thread = threading.Thread(target=deploy_slow)
        thread.start()
        deadline = time.monotonic() + 30
        while len(_live(serve, account_id, "app")[1]) < 2:  # the new version is stored ...
            assert time.monotonic() < deadline
            time.sleep(0.02)
        serve.kill9()  # ... and its isolate is starting: the deployment is not committed
        thread.join(30)
        assert replies and isinstance(replies[0], httpx.HTTPError)  # never acknowledged

        serve.start()
        live, versions = _live(serve, account_id, "app")
        assert live == v1 and len(versions) == 2  # the half-made version exists, is not live
        assert serve.worker("faulty", "app").text.startswith("one ")

        # An acknowledged deploy, secret and rollback survive a kill right after the answer.
        with serve.api(token) as api:
            acked = put_worker(api, account_id, "app", answer("three"))
            assert acked.status_code == 200
            secret = api.put(
                f"/accounts/{account_id}/workers/scripts/app/secrets",
                json={"name": "TOKEN", "text": "kept", "type": "secret_text"},
            )
            assert secret.status_code == 200
        serve.kill9()
        serve.start()
        assert serve.worker("faulty", "app").text == "three var=None kv=None secret=True"
    finally:
        serve.stop()


def test_kill_during_kv_writes_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state")
    try:
        account_id, token = permanent_account(serve, "kvfault")
        with serve.api(token) as api:
            namespace = api.post(
                f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "f"}
            ).json()["result"]["id"]
            binding = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
            assert put_worker(api, account_id, "kv", KV_WORKER, bindings=binding).status_code == 200
        values = f"/accounts/{account_id}/storage/kv/namespaces/{namespace}/values"
        acked: dict[str, str] = {}
        lock = threading.Lock()
        stop = threading.Event()

        def write_rest() -> None:
            with serve.api(token) as api:
                for i in range(100_000):
                    if stop.is_set():
                        return
                    try:
                        reply = api.put(f"{values}/rest-{i}", content=f"r{i}".encode())
                    except httpx.HTTPError:
                        return
                    if reply.status_code == 200:
                        with lock:
                            acked[f"rest-{i}"] = f"r{i}"

        def write_binding() -> None:
            for i in range(100_000):
                if stop.is_set():
                    return
                try:
                    reply = serve.worker("kvfault", "kv", f"/bind-{i}", method="PUT",
                                         content=f"b{i}".encode())  # fmt: skip
                except httpx.HTTPError:
                    return
                if reply.status_code == 200:
                    with lock:
                        acked[f"bind-{i}"] = f"b{i}"

        writers = [threading.Thread(target=write_rest), threading.Thread(target=write_binding)]
        for writer in writers:
            writer.start()
        deadline = time.monotonic() + 60
        while sum(k.startswith("bind-") for k in list(acked)) < 20 or len(acked) < 60:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        serve.kill9()
        stop.set()
        for writer in writers:
            writer.join(30)
        serve.start()
        with serve.api(token) as api:
            lost = {
                key: value
                for key, value in sorted(acked.items())
                if api.get(f"{values}/{key}").content != value.encode()
            }
        assert lost == {}, f"{len(lost)} of {len(acked)} acknowledged writes lost"
    finally:
        serve.stop()
