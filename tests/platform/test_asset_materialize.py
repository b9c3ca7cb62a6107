"""An asset path that cannot become a file is refused when its session starts, and a version
whose asset tree cannot be written out is not kept (its script upload fails with nothing left)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.api.uploads import UploadRequest, store_upload
from ember.runtime.deployments.clock import ManualClock
from ember.runtime.deployments.errors import InvalidRequest
from ember.runtime.deployments.plane import ControlPlane
from tests.platform.conftest import worker_upload


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path / "state", clock=ManualClock())
    yield plane
    plane.close()


def test_a_path_segment_over_255_bytes_is_refused_at_session_start(plane: ControlPlane) -> None:
    account, _ = plane.accounts.create_permanent("acme")
    long = "/docs/" + "é" * 128 + ".txt"  # 261 bytes in UTF-8, 133 characters
    with pytest.raises(InvalidRequest, match="longer than 255 bytes") as raised:
        plane.start_assets(account, {"manifest": {long: {"hash": "a" * 32, "size": 1}}})
    assert long[:40] in str(raised.value)
    fits = "/" + "a" * 255
    plane.start_assets(account, {"manifest": {fits: {"hash": "a" * 32, "size": 1}}})


def test_a_version_whose_assets_cannot_be_written_out_is_not_kept(plane: ControlPlane) -> None:
    account, _ = plane.accounts.create_permanent("acme")
    started = plane.start_assets(account, {"manifest": {"/a.txt": {"hash": "a" * 32, "size": 3}}})
    jwt = plane.assets.upload(account.id, started["jwt"], {"a" * 32: base64.b64encode(b"abc")})
    # The stored file vanished (any failure other than a full disk writing the tree out).
    plane.assets.files.blob(account.id, "a" * 32).unlink()
    body, content_type = worker_upload(assets={"jwt": jwt, "config": {}})
    request = UploadRequest(account, "site", body, content_type, False, True, "api", False)
    with pytest.raises(OSError):
        store_upload(plane, request)
    assert plane.scripts.list(account) == []
    versions = plane.files.account_dir(account.id) / "versions"
    assert not versions.exists() or not list(versions.iterdir())
