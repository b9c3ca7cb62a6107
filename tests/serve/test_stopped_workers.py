"""A worker's code stops when its temporary account expires (at that instant, not at the sweep)
and when the worker is deleted: its isolates are killed, a request in flight is answered with a
clear error or its stream cut, and nothing it does afterwards reaches a binding. Before, a
handler streaming and calling bindings every few seconds ran on until the wall-time limit (KV
refused only once the sweep had deleted the namespace, ``env.AI`` never), and the operator's
log named the stopped isolate by its raw slot id."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

from tests.serve.conftest import (
    ServeProcess,
    permanent_account,
    put_worker,
    redeploy,
    temporary_account,
)

TTL_S = 15  # long enough to deploy on a loaded machine; the test waits it out once
CONFIG = f"""\
platform:
  proof_of_work: {{k: 64, g: 64, sample: 8}}
  temporary: {{ttl: {TTL_S}s, cpu_ms_per_request: 30000}}
"""
# (The CPU raise: every request is charged its isolate's CPU while it is in flight, so the
# sleeping request would otherwise pass the temporary tier's 50 ms on the ticks' CPU.)
WORKER = """\
import asyncio, time
from workers import Response


async def on_fetch(request, env):
    if request.url.endswith("/stream"):
        async def ticks():
            while True:
                stamp = repr(time.time())
                try:
                    await env.KV.put(stamp, "tick")
                    yield f"put {stamp}\\n".encode()
                except Exception as exc:
                    yield f"refused {type(exc).__name__}: {exc}\\n".encode()
                await asyncio.sleep(0.2)
        return Response(ticks())
    if request.url.endswith("/sleep"):
        await asyncio.sleep(120)
        return Response("slept through")
    return Response("alive")
"""


class TwoRequests:
    """A streamed request and a sleeping one to a worker, each read on its own thread."""

    def __init__(self, serve: ServeProcess, account: str, worker: str) -> None:
        self.lines: list[str] = []
        self.stream_ended: BaseException | None = None
        self.slept: httpx.Response | BaseException | None = None
        self.streaming = threading.Event()
        host = {"host": f"{worker}.{account}.localhost"}
        self._threads = [
            threading.Thread(target=self._stream, args=(serve.url, host), daemon=True),
            threading.Thread(target=self._sleep, args=(serve.url, host), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _stream(self, url: str, host: dict[str, str]) -> None:
        try:
            with httpx.stream("GET", url + "/stream", headers=host, timeout=60) as response:
                for line in response.iter_lines():
                    self.lines.append(line)
                    self.streaming.set()
        except httpx.HTTPError as exc:
            self.stream_ended = exc
        self.streaming.set()

    def _sleep(self, url: str, host: dict[str, str]) -> None:
        try:
            self.slept = httpx.get(url + "/sleep", headers=host, timeout=60)
        except httpx.HTTPError as exc:
            self.slept = exc

    def join(self) -> None:
        for thread in self._threads:
            thread.join(90)
            assert not thread.is_alive(), "a request to the stopped worker is still running"


def _kv_namespace(api: httpx.Client, account_id: str) -> str:
    created = api.post(f"/accounts/{account_id}/storage/kv/namespaces", json={"title": "ticks"})
    assert created.status_code == 200, created.text
    return str(created.json()["result"]["id"])


def _stopped_lines(serve: ServeProcess) -> list[str]:
    return [line for line in serve.output().splitlines() if "isolate stopped" in line]


def test_an_expiring_account_stops_its_workers_at_that_instant(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path / "state", CONFIG, "--gc-interval", "3600")
    try:
        created = temporary_account(serve)
        account = created["account"]  # type: ignore[index]
        account_id, name, token = account["id"], account["name"], account["apiToken"]  # type: ignore[index]
        expires = datetime.fromisoformat(account["expiresAt"].replace("Z", "+00:00"))  # type: ignore[index]
        with serve.api(token) as api:
            namespace = _kv_namespace(api, account_id)
            kv = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
            assert put_worker(api, account_id, "ticker", WORKER, bindings=kv).status_code == 200
        running = TwoRequests(serve, name, "ticker")
        assert running.streaming.wait(60) and running.lines, running.stream_ended
        assert time.time() < expires.timestamp(), "setup outlasted the TTL: raise TTL_S"

        running.join()  # both end at the expiry, not at the wall-time limit or a sweep

        assert isinstance(running.slept, httpx.Response), running.slept
        assert running.slept.status_code == 503, running.slept.text
        assert "its temporary account expired" in running.slept.text
        assert isinstance(running.stream_ended, httpx.RemoteProtocolError), running.stream_ended
        assert all(line.startswith("put ") for line in running.lines), running.lines
        plane = serve.plane()
        try:
            stored = [key.name for key in plane.kv.store.list(namespace).keys]
        finally:
            plane.close()
        assert stored and all(float(key) < expires.timestamp() for key in stored), stored
        stopped = _stopped_lines(serve)
        assert stopped and all(f"ticker.{name}:" in line for line in stopped), stopped
        assert not any(account_id in line for line in stopped), stopped
        assert "deleted expired temporary account" not in serve.output()  # not the sweep
    finally:
        serve.stop()


def test_a_deleted_worker_stops_at_once_old_versions_included(serve: ServeProcess) -> None:
    account_id, token = permanent_account(serve, "deleting")
    with serve.api(token) as api:
        namespace = _kv_namespace(api, account_id)
        kv = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
        assert put_worker(api, account_id, "ticker", WORKER, bindings=kv).status_code == 200
        running = TwoRequests(serve, "deleting", "ticker")
        assert running.streaming.wait(60) and running.lines, running.stream_ended
        # A new version: the first drains, its requests in flight carry on ...
        assert redeploy(api, account_id, "ticker", WORKER, bindings=kv).status_code == 200
        assert serve.worker("deleting", "ticker").text == "alive"
        lines_before = len(running.lines)
        deadline = time.monotonic() + 30
        while len(running.lines) == lines_before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(running.lines) > lines_before, "the drained version stopped streaming"
        # ... until the worker is deleted.
        deleted = api.delete(f"/accounts/{account_id}/workers/scripts/ticker")
        assert deleted.status_code == 200, deleted.text

    running.join()
    assert isinstance(running.slept, httpx.Response), running.slept
    assert running.slept.status_code == 503, running.slept.text
    assert "it was deleted" in running.slept.text
    assert isinstance(running.stream_ended, httpx.RemoteProtocolError), running.stream_ended
    stopped = [line for line in _stopped_lines(serve) if "deleted" in line]
    assert stopped and all("ticker.deleting:" in line for line in stopped), stopped
    assert not any(account_id in line for line in stopped), stopped


def test_a_claimed_account_runs_on_past_its_old_expiry(tmp_path: Path) -> None:
    """A claim before the end makes the account permanent: nothing of it stops at the old end,
    neither the new permanent version nor a request still streaming on the temporary one."""
    serve = ServeProcess(tmp_path / "state", CONFIG, "--gc-interval", "3600")
    try:
        created = temporary_account(serve)
        account = created["account"]  # type: ignore[index]
        account_id, name, token = account["id"], account["name"], account["apiToken"]  # type: ignore[index]
        expires = datetime.fromisoformat(account["expiresAt"].replace("Z", "+00:00"))  # type: ignore[index]
        with serve.api(token) as api:
            namespace = _kv_namespace(api, account_id)
            kv = [{"name": "KV", "type": "kv_namespace", "namespace_id": namespace}]
            assert put_worker(api, account_id, "ticker", WORKER, bindings=kv).status_code == 200
        running = TwoRequests(serve, name, "ticker")
        assert running.streaming.wait(60) and running.lines, running.stream_ended
        with serve.api() as anonymous:
            claim = {"claimToken": created["claim"]["token"]}  # type: ignore[index]
            claimed = anonymous.post("/provisioning/previews/claim", json=claim)
        assert claimed.status_code == 200, claimed.text
        assert time.time() < expires.timestamp(), "setup outlasted the TTL: raise TTL_S"

        deadline = time.monotonic() + TTL_S + 60
        while time.monotonic() < deadline and not any(
            line.startswith("put ") and float(line[4:]) > expires.timestamp() + 1
            for line in list(running.lines)
        ):
            assert running.stream_ended is None, running.stream_ended
            time.sleep(0.1)
        assert running.stream_ended is None, running.stream_ended
        assert all(line.startswith("put ") for line in running.lines), running.lines[-3:]
        assert float(running.lines[-1][4:]) > expires.timestamp() + 1, running.lines[-3:]
        assert serve.worker(name, "ticker").text == "alive"
        assert running.slept is None  # still sleeping on the temporary version
        assert not _stopped_lines(serve), _stopped_lines(serve)
        # Done: deleting the worker ends both requests at once. A request still in flight would
        # hold the SIGTERM'd platform in its graceful drain, which stop() waits out for 15 s.
        plane = serve.plane()
        try:
            owner = plane.accounts.issue_token(account_id).token  # the claim revoked `token`
        finally:
            plane.close()
        with serve.api(owner) as api:
            deleted = api.delete(f"/accounts/{account_id}/workers/scripts/ticker")
            assert deleted.status_code == 200, deleted.text
        running.join()
    finally:
        serve.stop()
