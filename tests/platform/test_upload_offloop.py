"""Worker uploads run off the event loop, and one worker's uploads keep their order.

An upload of 10,000 modules held the platform's only event loop for over a second (parsing,
storing, writing files), so every other tenant waited. Here an upload is held in its store
step (the ``StoreUpload`` seam wraps the real ``store_upload``, blocking on an event after the
version is stored and written out) while other tenants are served; nothing asserts on time:
a request that is not answered within its client timeout fails the test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ember.runtime.api.app import create_api_app
from ember.runtime.api.uploads import UploadRequest, Uploads, store_upload
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.multipart import Part
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.scripts import UploadResult
from ember.runtime.deployments.tail_events import TailHub
from tests.platform.conftest import TEST_CONFIG, ServerThread, worker_upload

MODULES = 2_000  # many small files, as in the audit's repro (which used 10,000)
# A loop blocked by the held upload would leave these unanswered; generous for a busy machine.
ANSWER_TIMEOUT_S = 20.0


@dataclass
class HeldStore:
    """``store_upload``, held after the version is stored and written out until released."""

    hold: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    calls: list[str] = field(default_factory=list)

    def __call__(self, plane: ControlPlane, request: UploadRequest) -> UploadResult:
        result = store_upload(plane, request)
        self.calls.append(f"{request.name}:{result.version.number}")
        if self.hold.is_set():
            self.entered.set()
            assert self.release.wait(60), "the test never released the held upload"
        return result


@dataclass
class Running:
    plane: ControlPlane
    api: str
    store: HeldStore
    uploads: Uploads


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    plane = ControlPlane(tmp_path / "state", TEST_CONFIG, clock=ManualClock())
    store = HeldStore()
    uploads = Uploads(plane, store=store)
    app = create_api_app(plane, TailHub(), uploads=uploads)
    try:
        with ServerThread(app) as port:
            yield Running(plane, f"http://127.0.0.1:{port}/client/v4", store, uploads)
    finally:
        store.release.set()
        uploads.close()
        plane.close()


def _client(running: Running, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=running.api,
        headers={"authorization": f"Bearer {token}"},
        timeout=ANSWER_TIMEOUT_S,
    )


def _big_upload(tag: str) -> tuple[bytes, str]:
    extra = [
        Part(f"lib/m{i}.py", f"lib/m{i}.py", "text/x-python", f"VALUE = {i}\n".encode())
        for i in range(MODULES)
    ]
    return worker_upload(source=f"TAG = {tag!r}\n".encode(), extra_parts=extra)


def _put(client: httpx.Client, account_id: str, name: str, upload: tuple[bytes, str]) -> object:
    body, content_type = upload
    return client.put(
        f"/accounts/{account_id}/workers/scripts/{name}",
        content=body,
        headers={"content-type": content_type},
        timeout=120,
    )


def _wait(condition: object, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.01)


def test_other_tenants_are_answered_while_an_upload_is_stored(running: Running) -> None:
    plane = running.plane
    big, big_token = plane.accounts.create_permanent("big")
    other, other_token = plane.accounts.create_permanent("other")
    with _client(running, other_token.token) as client:
        first = _put(client, other.id, "small", worker_upload())
        assert first.status_code == 200, first.text  # type: ignore[attr-defined]

    running.store.hold.set()
    with ThreadPoolExecutor(1) as pool, _client(running, big_token.token) as uploader:
        pending: Future[httpx.Response] = pool.submit(
            _put, uploader, big.id, "huge", _big_upload("v1")
        )  # type: ignore[arg-type]
        try:
            assert running.store.entered.wait(120), "the upload never reached its store step"
            with _client(running, other_token.token) as client:
                # Answered by the event loop (auth reads the database) while the upload waits.
                assert client.get("/user/tokens/verify").status_code == 200
                listed = client.get(f"/accounts/{other.id}/workers/scripts/small/versions")
                assert listed.status_code == 200
                assert len(listed.json()["result"]["items"]) == 1
            assert not pending.done()  # it really was held all along
        finally:
            running.store.release.set()
        stored = pending.result(timeout=120)
    assert stored.status_code == 200, stored.text
    version_id = stored.json()["result"]["deployment_id"]
    version = plane.scripts.version(big, "huge", version_id)
    assert len(plane.scripts.modules(version.id)) == MODULES + 1
    live = plane.scripts.live(big, "huge")
    assert live is not None and live.versions[0].version_id == version_id
    written = plane.files.account_dir(big.id) / "versions" / version_id / "modules"
    assert (written / "lib" / f"m{MODULES - 1}.py").read_text() == f"VALUE = {MODULES - 1}\n"
    assert (written / "entry.py").read_text() == "TAG = 'v1'\n"


def test_two_uploads_of_one_worker_are_stored_and_deployed_in_arrival_order(
    running: Running,
) -> None:
    plane = running.plane
    account, token = plane.accounts.create_permanent("acme")
    with _client(running, token.token) as client:
        assert _put(client, account.id, "w", worker_upload()).status_code == 200  # type: ignore[attr-defined]
    running.store.hold.set()
    with ThreadPoolExecutor(2) as pool, _client(running, token.token) as client:
        first = pool.submit(_put, client, account.id, "w", _big_upload("first"))
        try:
            assert running.store.entered.wait(120)
            running.store.hold.clear()  # the second is not held once it gets its turn
            second = pool.submit(_put, client, account.id, "w", worker_upload(source=b"TAG = 2\n"))
            # The second waits for the worker's lock (it is queued behind the first) ...
            _wait(lambda: running.uploads.queued(account.id, "w") == 2, "the second upload")
            assert running.store.calls == ["w:1", "w:2"]  # ... and has not been stored yet
        finally:
            running.store.release.set()
        replies = [first.result(timeout=120), second.result(timeout=120)]
    assert [r.status_code for r in replies] == [200, 200]  # type: ignore[attr-defined]
    assert running.store.calls == ["w:1", "w:2", "w:3"]
    ids = [r.json()["result"]["deployment_id"] for r in replies]  # type: ignore[attr-defined]
    numbers = [plane.scripts.version(account, "w", i).number for i in ids]
    assert numbers == [2, 3]
    deployments = plane.scripts.deployments(account, "w")  # newest first
    assert [d.versions[0].version_id for d in deployments[:2]] == [ids[1], ids[0]]
    assert all(d.annotations["workers/triggered_by"] == "upload" for d in deployments)
    assert running.uploads.queued(account.id, "w") == 0  # the lock is forgotten when idle


def _secret(client: httpx.Client, account_id: str, name: str, method: str) -> httpx.Response:
    path = f"/accounts/{account_id}/workers/scripts/{name}/secrets"
    if method == "PUT":
        body = {"name": "API_KEY", "text": "s3cret", "type": "secret_text"}
        return client.put(path, json=body, timeout=120)
    return client.delete(f"{path}/API_KEY", timeout=120)


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_a_secret_change_waits_for_the_workers_upload_in_flight(
    running: Running, method: str
) -> None:
    # A secret change derives a new version from the live one and deploys it. Run between an
    # upload being stored and going live, it was based on the old version and then replaced by
    # the upload's: the new secret was lost (or a deleted one came back).
    plane = running.plane
    account, token = plane.accounts.create_permanent("acme")
    with _client(running, token.token) as client:
        assert _put(client, account.id, "w", worker_upload()).status_code == 200  # type: ignore[attr-defined]
        if method == "DELETE":
            assert _secret(client, account.id, "w", "PUT").status_code == 200
    running.store.hold.set()
    with ThreadPoolExecutor(2) as pool, _client(running, token.token) as client:
        upload = pool.submit(_put, client, account.id, "w", worker_upload(source=b"TAG = 2\n"))
        try:
            assert running.store.entered.wait(120), "the upload never reached its store step"
            secret = pool.submit(_secret, client, account.id, "w", method)
            _wait(
                lambda: running.uploads.queued(account.id, "w") == 2 or secret.done(),
                "the secret change to queue or finish",
            )
            assert not secret.done(), "the secret change did not wait for the upload"
        finally:
            running.store.release.set()
        replies = [upload.result(timeout=120), secret.result(timeout=120)]
    # A DELETE now applies to the upload's version, which did not keep the secret (no
    # keep_bindings): 404, as Cloudflare answers for a secret the live version lacks.
    expected = [200, 200 if method == "PUT" else 404]
    assert [r.status_code for r in replies] == expected  # type: ignore[attr-defined]
    live = plane.scripts.live(account, "w")
    assert live is not None
    version = plane.scripts.version(account, "w", live.versions[0].version_id)
    assert [n for n, _ in plane.secrets.list(account, "w")] == (
        ["API_KEY"] if method == "PUT" else []
    )
    sources = {m.name: m.content for m in plane.scripts.modules(version.id)}
    assert sources["entry.py"] == b"TAG = 2\n"  # based on the upload's version
    assert running.uploads.queued(account.id, "w") == 0
