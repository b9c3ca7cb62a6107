"""A Worker keeps its most recent versions (``platform.versions_kept_per_worker``, Cloudflare's
100): older ones are pruned with their rows and files, except those of the live deployment; the
account's caps count what is kept (``max_versions``, ``max_stored_script_bytes``). All over the
real client/v4 API, checked against the API, the database and the disk."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Protocol

import httpx
import pytest

from ember.runtime.api.live import LiveHooks, StateOnly
from ember.runtime.deployments.config import PlatformConfig, parse_platform_config
from ember.runtime.deployments.errors import InvalidUpload, VersionNotFound
from ember.runtime.deployments.plane import ControlPlane
from ember.runtime.deployments.records import Account
from tests.platform.conftest import TEST_CONFIG, RunningPlatform, start_platform, worker_upload
from tests.platform.helpers import error_of, temporary_tenant

KEPT = 3


@dataclasses.dataclass
class Tenant:
    plane: ControlPlane
    state_dir: Path
    account_id: str
    client: httpx.Client

    @property
    def scripts(self) -> str:
        return f"/accounts/{self.account_id}/workers/scripts"

    def put(self, name: str, source: bytes = b"print('hi')\n") -> str:
        """``PUT .../scripts/{name}`` (upload and deploy); returns the version id."""
        body, content_type = worker_upload(source=source)
        reply = self.client.put(
            f"{self.scripts}/{name}?bindings_inherit=strict",
            content=body,
            headers={"content-type": content_type},
        )
        assert reply.status_code == 200, reply.text
        return str(reply.json()["result"]["deployment_id"])

    def post_version(self, name: str, source: bytes = b"print('hi')\n") -> httpx.Response:
        body, content_type = worker_upload(source=source)
        return self.client.post(
            f"{self.scripts}/{name}/versions?bindings_inherit=strict",
            content=body,
            headers={"content-type": content_type},
        )

    def upload(self, name: str, source: bytes = b"print('hi')\n") -> str:
        """``POST .../versions`` (stored, not deployed); returns the version id."""
        reply = self.post_version(name, source)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["result"]["id"])

    def deploy(self, name: str, split: dict[str, float]) -> httpx.Response:
        return self.client.post(
            f"{self.scripts}/{name}/deployments",
            json={
                "strategy": "percentage",
                "versions": [{"version_id": v, "percentage": p} for v, p in split.items()],
            },
        )

    def listed(self, name: str) -> list[str]:
        reply = self.client.get(f"{self.scripts}/{name}/versions")
        assert reply.status_code == 200, reply.text
        return [item["id"] for item in reply.json()["result"]["items"]]

    def stored(self, name: str) -> set[str]:
        """Version ids in the database, straight from SQLite."""
        with self.plane.db.reader() as conn:
            found = conn.execute(
                "SELECT v.id FROM versions v JOIN scripts s ON s.id = v.script_id "
                "WHERE s.account_id = ? AND s.name = ?",
                (self.account_id, name),
            ).fetchall()
        return {r["id"] for r in found}

    def rows_of(self, version_ids: set[str]) -> int:
        """Rows left anywhere for these versions (versions, modules, deployment targets)."""
        marks = ",".join("?" * len(version_ids))
        ids = tuple(version_ids)
        with self.plane.db.reader() as conn:
            return sum(
                conn.execute(
                    f"SELECT COUNT(*) FROM {table} WHERE {column} IN ({marks})", ids
                ).fetchone()[0]
                for table, column in (
                    ("versions", "id"),
                    ("modules", "version_id"),
                    ("version_secrets", "version_id"),
                    ("deployment_versions", "version_id"),
                )
            )

    def on_disk(self) -> set[str]:
        versions = self.state_dir / "accounts" / self.account_id / "versions"
        return {p.name for p in versions.iterdir()} if versions.is_dir() else set()


def config_with(**platform: object) -> PlatformConfig:
    """TEST_CONFIG's small proof of work, with these ``platform:`` keys."""
    parsed = parse_platform_config(platform)
    return dataclasses.replace(
        parsed,
        max_script_bytes=TEST_CONFIG.max_script_bytes,
        proof_of_work=TEST_CONFIG.proof_of_work,
    )


class TenantOn(Protocol):
    def __call__(self, config: PlatformConfig, live: LiveHooks | None = None) -> Tenant: ...


@pytest.fixture
def tenant_on(tmp_path: Path) -> Iterator[TenantOn]:
    """``tenant_on(config)``: a permanent account on a platform served with ``config``."""
    with ExitStack() as stack:

        def make(config: PlatformConfig, live: LiveHooks | None = None) -> Tenant:
            state_dir = tmp_path / "state"
            plane, clock, server, hub = start_platform(state_dir, config, live)
            stack.callback(plane.close)
            port = stack.enter_context(server)
            url = f"http://127.0.0.1:{port}"
            platform = RunningPlatform(plane, clock, url, url + "/client/v4", hub)
            account, issued = plane.accounts.create_permanent("acme")
            client = stack.enter_context(platform.client(issued.token))
            return Tenant(plane, state_dir, account.id, client)

        yield make


def test_a_worker_keeps_its_newest_versions_and_the_deployed_one(tenant_on: TenantOn) -> None:
    t = tenant_on(config_with(versions_kept_per_worker=KEPT))
    deployed = t.put("w")  # version 1: live throughout
    uploaded = [deployed] + [t.upload("w", f"print({i})\n".encode()) for i in range(102)]
    assert len(uploaded) == 103

    kept = set(uploaded[-KEPT:]) | {deployed}
    pruned = set(uploaded) - kept
    assert t.listed("w") == [*reversed(uploaded[-KEPT:]), deployed]  # newest first
    assert t.stored("w") == kept
    assert t.rows_of(pruned) == 0
    assert t.on_disk() == kept

    # The live deployment still points at version 1, which still answers.
    deployments = t.client.get(f"{t.scripts}/w/deployments").json()["result"]["deployments"]
    assert deployments[0]["versions"] == [{"version_id": deployed, "percentage": 100.0}]
    assert t.client.get(f"{t.scripts}/w/versions/{deployed}").status_code == 200

    # Rolling back to a pruned version: the unknown-version refusal, saying why it may be gone.
    gone = uploaded[1]
    status, code, message = error_of(t.deploy("w", {gone: 100}))
    assert (status, code) == (400, 10001)
    assert f"versions[0].version_id {gone!r} is not a version of Worker 'w'" in message
    assert f"keeps its {KEPT} most recent versions" in message
    status, code, message = error_of(t.client.get(f"{t.scripts}/w/versions/{gone}"))
    assert (status, code) == (404, 10007)
    assert gone in message and f"keeps its {KEPT} most recent versions" in message
    assert t.stored("w") == kept  # the refusal changed nothing


def test_a_gradual_deployment_keeps_both_versions(tenant_on: TenantOn) -> None:
    t = tenant_on(config_with(versions_kept_per_worker=KEPT))
    first = t.put("w")
    second = t.upload("w")
    assert t.deploy("w", {first: 30, second: 70}).status_code == 200
    newer = [t.upload("w", f"print({i})\n".encode()) for i in range(2 * KEPT)]
    assert t.stored("w") == set(newer[-KEPT:]) | {first, second}
    assert t.on_disk() == set(newer[-KEPT:]) | {first, second}


class Refusing(StateOnly):
    """Live hooks that refuse every version once ``refuse`` is set, as ``ember serve`` refuses
    one whose module raises at import (``WorkerStartupFailed``, an ``InvalidUpload``)."""

    def __init__(self) -> None:
        self.refuse = False

    def _check(self) -> None:
        if self.refuse:
            raise InvalidUpload("the Worker failed to start: RuntimeError at import")

    @asynccontextmanager
    async def deploying(
        self, account: Account, name: str, version_ids: list[str], *, uploaded: bool = False
    ) -> AsyncIterator[None]:
        self._check()
        yield

    async def prepare(self, account: Account, name: str, version_id: str) -> None:
        self._check()


def test_a_refused_upload_prunes_nothing(tenant_on: TenantOn) -> None:
    """A stored version that is then refused is discarded, and so is nothing else: the
    versions it would have pushed out of the window stay, in the API, the database and on disk.
    (Ten refused uploads used to wipe a temporary account's rollback history.)"""
    hooks = Refusing()
    t = tenant_on(config_with(versions_kept_per_worker=KEPT), hooks)
    # The live version 1 and a full window after it: the next version pushes version 2 out.
    kept = [t.put("w")] + [t.upload("w", f"print({i})\n".encode()) for i in range(KEPT)]
    assert t.stored("w") == set(kept)
    hooks.refuse = True
    for i in range(2 * KEPT):
        status, code, _ = error_of(t.post_version("w", f"raise RuntimeError({i})\n".encode()))
        assert (status, code) == (400, 10021)
        body, content_type = worker_upload(source=b"raise RuntimeError()\n")
        refused = t.client.put(
            f"{t.scripts}/w?bindings_inherit=strict",
            content=body,
            headers={"content-type": content_type},
        )
        assert error_of(refused)[:2] == (400, 10021)
    assert t.listed("w") == list(reversed(kept))
    assert t.stored("w") == set(kept) and t.on_disk() == set(kept)
    hooks.refuse = False  # an accepted upload prunes as before
    newest = t.upload("w")
    assert t.listed("w") == [newest, *reversed(kept[2:]), kept[0]]  # the live one stays
    assert t.on_disk() == {newest, *kept[2:], kept[0]}
    newer = t.put("w")  # live moves on: the old live version, past the window, goes
    assert t.listed("w") == [newer, newest, kept[-1]]
    assert t.on_disk() == {newer, newest, kept[-1]}


def test_materialize_refuses_a_version_without_rows(tenant_on: TenantOn) -> None:
    """A version pruned between reading it and writing it out: no empty folder (an orphan,
    and an isolate that fails on a missing main module), the unknown-version error instead."""
    t = tenant_on(config_with(versions_kept_per_worker=KEPT))
    account = t.plane.accounts.find(t.account_id)
    assert account is not None
    version = t.plane.scripts.version(account, "w", t.put("w"))
    with t.plane.db.transaction() as conn:
        conn.execute("DELETE FROM versions WHERE id = ?", (version.id,))
    (t.state_dir / "accounts" / t.account_id / "versions" / version.id).rename(t.state_dir / "gone")
    with pytest.raises(VersionNotFound, match=version.id):
        t.plane.materialize(t.account_id, version)
    assert version.id not in t.on_disk()


def test_deployment_history_names_only_kept_versions(tenant_on: TenantOn) -> None:
    """wrangler's ``deployments list`` fetches every version a listed deployment names: a
    deployment of a pruned version goes with it, the live one stays."""
    t = tenant_on(config_with(versions_kept_per_worker=KEPT))
    deployed = [t.put("w", f"print({i})\n".encode()) for i in range(KEPT + 4)]
    history = t.client.get(f"{t.scripts}/w/deployments").json()["result"]["deployments"]
    named = [d["versions"][0]["version_id"] for d in history]
    assert named == list(reversed(deployed[-KEPT:]))
    for version_id in named:
        assert t.client.get(f"{t.scripts}/w/versions/{version_id}").status_code == 200


def test_a_secret_change_prunes_too(tenant_on: TenantOn) -> None:
    t = tenant_on(config_with(versions_kept_per_worker=KEPT))
    first = t.put("w")
    for i in range(KEPT + 1):
        secret = {"name": "S", "text": str(i), "type": "secret_text"}
        assert t.client.put(f"{t.scripts}/w/secrets", json=secret).status_code == 200
    listed = t.listed("w")
    assert len(listed) == KEPT and first not in listed
    assert t.stored("w") == set(listed)
    assert first not in t.on_disk() and t.on_disk() <= t.stored("w")


def test_the_default_keeps_a_hundred(tenant_on: TenantOn) -> None:
    assert PlatformConfig().versions_kept_per_worker == 100  # Cloudflare's rollback window
    t = tenant_on(config_with())
    deployed = t.put("w")
    uploaded = [deployed] + [t.upload("w", f"print({i})\n".encode()) for i in range(102)]
    kept = set(uploaded[-100:]) | {deployed}
    assert len(t.listed("w")) == 101 and set(t.listed("w")) == kept
    assert t.stored("w") == kept and t.on_disk() == kept
    assert t.rows_of(set(uploaded[1:3])) == 0


def test_max_versions_counts_kept_versions(tenant_on: TenantOn) -> None:
    t = tenant_on(config_with(versions_kept_per_worker=KEPT, accounts={"max_versions": 4}))
    for i in range(20):  # a busy worker never reaches the cap by its history alone
        t.put("busy", f"print({i})\n".encode())
    assert len(t.stored("busy")) == KEPT
    t.put("other")  # 4 kept: the cap
    status, code, message = error_of(t.post_version("other"))
    assert (status, code) == (403, 10037)
    assert "stores 4 Worker versions" in message and "at most 4" in message
    assert "platform.accounts.max_versions" in message
    assert len(t.stored("other")) == 1


def test_stored_script_bytes_per_account(tenant_on: TenantOn) -> None:
    t = tenant_on(
        config_with(versions_kept_per_worker=2, accounts={"max_stored_script_bytes": "10KiB"})
    )
    four_k = b"#" * 4096
    t.put("a", four_k)
    t.put("a", four_k)  # 8 KiB kept
    t.put("a", four_k)  # the oldest is pruned first: still 8 KiB
    before = (t.stored("a"), t.on_disk())
    body, content_type = worker_upload(source=four_k)
    refused = t.client.put(
        f"{t.scripts}/b?bindings_inherit=strict",
        content=body,
        headers={"content-type": content_type},
    )
    status, code, message = error_of(refused)
    assert (status, code) == (403, 10037)
    # Used (two 4 KiB modules plus what their versions store besides), and the limit.
    used = int(re.search(r"store ([\d,]+) bytes", message)[1].replace(",", ""))  # type: ignore[index]
    assert 8192 < used < 8192 + 1024 and "10,240 bytes" in message
    assert "Delete Workers" in message
    assert "platform.accounts.max_stored_script_bytes" in message
    # Nothing of the refused upload is stored: no worker, no version, no files.
    assert t.client.get(f"{t.scripts}/b/versions").status_code == 404
    assert (t.stored("a"), t.on_disk()) == before
    status, _, _ = error_of(t.post_version("a", four_k * 3))  # 12 KiB alone: over the cap
    assert status == 403 and (t.stored("a"), t.on_disk()) == before


def test_temporary_accounts_have_their_own_byte_cap_and_kept_count(tmp_path: Path) -> None:
    config = config_with(
        temporary={"max_stored_script_bytes": "6KiB", "versions_kept_per_worker": 2}
    )
    assert PlatformConfig().limits_for(temporary=True).versions_kept_per_worker == 10
    with temporary_tenant(tmp_path / "state", config) as (_platform, account_id, client):
        scripts = f"/accounts/{account_id}/workers/scripts"

        def put(name: str, source: bytes) -> httpx.Response:
            body, content_type = worker_upload(source=source)
            return client.put(
                f"{scripts}/{name}?bindings_inherit=strict",
                content=body,
                headers={"content-type": content_type},
            )

        for i in range(4):
            assert put("w", b"#" * 2000 + str(i).encode()).status_code == 200
        assert len(client.get(f"{scripts}/w/versions").json()["result"]["items"]) == 2
        status, code, message = error_of(put("x", b"#" * 3000))
        assert (status, code) == (403, 10037)
        assert "6,144 bytes" in message and "claim the account" in message
