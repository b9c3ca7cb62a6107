"""A static asset upload (a form of up to 64 MiB) is parsed, decoded and written on an upload
thread, not on the event loop every tenant is served from.

The ``StoreAssets`` seam wraps the real ``store_assets`` and holds the upload as it enters,
with the form still the chunks received, unjoined and unparsed: whatever joins and parses it
runs after, on that thread. Meanwhile another tenant is answered; nothing asserts on time
(bench/asset_upload_stall.py measures the stall): a request not answered within its client
timeout fails the test.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ember.runtime.api.app import create_api_app
from ember.runtime.api.uploads import AssetUpload, Uploads, store_assets
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.tail_events import TailHub
from tests.platform.conftest import TEST_CONFIG, ServerThread

ANSWER_TIMEOUT_S = 20.0


@dataclass
class HeldAssets:
    """``store_assets``, held as it is entered until released."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    seen: list[AssetUpload] = field(default_factory=list)

    def __call__(self, plane: ControlPlane, request: AssetUpload) -> str | None:
        self.seen.append(request)
        self.entered.set()
        assert self.release.wait(60), "the test never released the held upload"
        return store_assets(plane, request)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[ControlPlane, str, HeldAssets]]:
    plane = ControlPlane(tmp_path / "state", TEST_CONFIG, clock=ManualClock())
    held = HeldAssets()
    uploads = Uploads(plane, store_assets=held)
    app = create_api_app(plane, TailHub(), uploads=uploads)
    try:
        with ServerThread(app) as port:
            yield plane, f"http://127.0.0.1:{port}/client/v4", held
    finally:
        held.release.set()
        uploads.close()
        plane.close()


def test_an_asset_form_is_parsed_off_the_event_loop(
    running: tuple[ControlPlane, str, HeldAssets],
) -> None:
    plane, api, held = running
    account, token = plane.accounts.create_permanent("site")
    other, other_token = plane.accounts.create_permanent("other")
    content = b"a" * (1024 * 1024)
    manifest = {"/a.bin": {"hash": "a" * 32, "size": len(content)}}
    jwt = plane.start_assets(account, {"manifest": manifest})["jwt"]
    form = {"a" * 32: ("a" * 32, base64.b64encode(content), "application/octet-stream")}

    def send() -> httpx.Response:
        return httpx.post(
            f"{api}/accounts/{account.id}/workers/assets/upload?base64=true",
            files=form,
            headers={"authorization": f"Bearer {jwt}"},
            timeout=120,
        )

    with ThreadPoolExecutor(1) as pool:
        pending: Future[httpx.Response] = pool.submit(send)
        try:
            assert held.entered.wait(60), "the upload never reached its store step"
            assert b"".join(held.seen[0].chunks).count(b"Content-Disposition") == 1  # unparsed
            assert held.seen[0].content_type.startswith("multipart/form-data")
            listed = httpx.get(
                f"{api}/accounts/{other.id}/workers/scripts",
                headers={"authorization": f"Bearer {other_token.token}"},
                timeout=ANSWER_TIMEOUT_S,
            )
            assert listed.status_code == 200, listed.text
            assert not pending.done()  # it really was held all along
        finally:
            held.release.set()
        done = pending.result(timeout=120)
    assert done.status_code == 201, done.text


def test_a_form_without_a_session_token_is_refused_before_it_is_read(
    running: tuple[ControlPlane, str, HeldAssets],
) -> None:
    plane, api, held = running
    account, token = plane.accounts.create_permanent("nosession")
    refused = httpx.post(
        f"{api}/accounts/{account.id}/workers/assets/upload?base64=true",
        files={"b" * 32: ("b" * 32, b"YQ==", "text/plain")},
        headers={"authorization": f"Bearer {token.token}"},  # the API token, not a session's
        timeout=ANSWER_TIMEOUT_S,
    )
    assert refused.status_code == 401, refused.text
    assert held.seen == []  # never handed to an upload thread


def test_a_temporary_accounts_manifest_body_is_bounded_before_it_is_parsed(
    running: tuple[ControlPlane, str, HeldAssets],
) -> None:
    """A temporary account lists at most 1,000 files: a 3 MB manifest body is refused (413)
    unread, where it was read and parsed first (the parse holds the interpreter, every
    tenant's loop with it); a permanent account's large manifest is still read."""
    from ember.runtime.deployments import pow

    plane, api, _ = running
    challenge = plane.issue_challenge()
    created = plane.create_temporary_account(
        "10.0.0.1", challenge.token, {"checkpoints": pow.solve_challenge(challenge)}
    )
    big = {f"/{i:07d}{'p' * 200}": {"hash": f"{i:032x}", "size": 1} for i in range(12_000)}
    permanent, issued = plane.accounts.create_permanent("large")
    for account, token, status in (
        (created.account, created.token.token, 413),
        (permanent, issued.token, 200),
    ):
        reply = httpx.post(
            f"{api}/accounts/{account.id}/workers/scripts/w/assets-upload-session",
            json={"manifest": big},
            headers={"authorization": f"Bearer {token}"},
            timeout=120,
        )
        assert reply.status_code == status, reply.text[:300]
