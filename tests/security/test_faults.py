"""Faults: SIGKILL the platform while its workers are busy and its tenants write KV.

The zygote, every sandbox monitor and every worker die with it (PDEATHSIG down the chain), no
process of theirs is left, and after a restart on the same state directory every KV write that
was acknowledged before the kill is there. Cgroups the killed monitors could not remove are
swept by the restarted supervisor.
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ember.runtime.sandbox import cgroup
from tests.runtime.harness import write_project

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
from workers import Response

async def fetch(request, env):
    if request.method == "PUT":
        await env.KV.put(request.headers["x-key"], await request.text())
        return Response("ok")
    value = await env.KV.get(request.headers["x-key"])
    return Response("missing" if value is None else value)
"""
BUSY = """
import asyncio
import threading
from workers import Response

def spin():
    while True:
        pass

async def fetch(request, env):
    if request.headers.get("x-spin"):
        threading.Thread(target=spin, daemon=True).start()
    await asyncio.sleep(30)
    return Response("done")
"""


class Platform:
    def __init__(self, state: Path, projects: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path[1:]])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.security.supervisor_main", str(state), str(projects)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        line = self.process.stdout.readline().split() if ready else []
        assert line[:1] == ["ready"], f"the platform did not start: {line}"
        self.url = f"http://127.0.0.1:{line[1]}"

    def client(self, deployment_id: str | None = None) -> httpx.Client:
        headers = {"x-test-deployment": deployment_id} if deployment_id else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def stop(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(10)


@pytest.fixture
def places() -> Iterator[tuple[Path, Path]]:
    base = Path(tempfile.mkdtemp(prefix="ember-faults-"))
    base.chmod(0o711)
    projects = base / "projects"
    write_project(projects / "writer", WRITER, "kv_namespaces:\n  - binding: KV\n    id: ns-w\n")
    write_project(projects / "busy", BUSY)
    try:
        yield base / "state", projects
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def _write_until(stop: threading.Event, client: httpx.Client, acked: dict[str, str]) -> None:
    for index in range(100_000):
        if stop.is_set():
            return
        key = f"k{index}"
        value = hashlib.sha256(key.encode()).hexdigest()
        try:
            reply = client.put("/", content=value, headers={"x-key": key})
        except httpx.HTTPError:
            return  # the platform is gone
        if reply.status_code == 200 and reply.text == "ok":
            acked[key] = value


def _exited(pidfd: int, timeout: float) -> bool:
    return bool(select.select([pidfd], [], [], timeout)[0])


def test_sigkill_of_the_platform_leaves_no_process_and_loses_no_acknowledged_write(
    places: tuple[Path, Path],
) -> None:
    state, projects = places
    platform = Platform(state, projects)
    acked: dict[str, str] = {}
    stop = threading.Event()
    try:
        with platform.client("busy") as busy, platform.client("writer") as writer:
            busy_requests = [
                threading.Thread(target=_quietly, args=(busy, headers), daemon=True)
                for headers in ({}, {"x-spin": "1"}, {})
            ]
            for thread in busy_requests:
                thread.start()
            writing = threading.Thread(target=_write_until, args=(stop, writer, acked))
            writing.start()
            while len(acked) < 20:
                time.sleep(0.01)
            with platform.client() as admin:
                pids = admin.get("/__pids").json()
            tree = [pids["zygote"]] + [pid for pair in pids["isolates"].values() for pid in pair]
            pidfds = {pid: os.pidfd_open(pid) for pid in tree}
            os.kill(platform.process.pid, signal.SIGKILL)  # mid-write, workers busy
            writing.join(10)
        platform.stop()
        survivors = [pid for pid, fd in pidfds.items() if not _exited(fd, 5.0)]
        assert not survivors, f"processes outlived the platform: {survivors}"
        for fd in pidfds.values():
            os.close(fd)
        stored = _stored(state / "kv.sqlite3", "ns-w")
        lost = [key for key, value in acked.items() if stored.get(key) != value]
        assert not lost, f"acknowledged writes lost: {lost[:5]}"
    finally:
        stop.set()
        platform.stop()
    restarted = Platform(state, projects)
    try:
        with restarted.client("writer") as writer:
            for key in list(acked)[-10:]:  # the latest acknowledged writes, through the API
                assert writer.get("/", headers={"x-key": key}).text == acked[key]
        assert not _stale_cgroups()  # the killed monitors' groups were swept at the restart
    finally:
        restarted.stop(signal.SIGTERM)
    assert not _stale_cgroups()  # a graceful close leaves none either


def _quietly(client: httpx.Client, headers: dict[str, str]) -> None:
    try:
        client.get("/", headers=headers)
    except httpx.HTTPError:
        pass


def _stored(path: Path, namespace: str) -> dict[str, str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT key, value FROM kv WHERE namespace = ?", (namespace,))
        return {bytes(k).decode(): bytes(v).decode() for k, v in rows}
    finally:
        db.close()


def _stale_cgroups() -> list[str]:
    """Groups of this test's deployments whose monitor is gone."""
    ours = tuple(cgroup.group_name(name, 0)[:-1] for name in ("busy", "writer"))
    return [
        path
        for parent in _cgroup_parents()
        for path in os.listdir(parent)
        if path.startswith(ours) and not cgroup._monitor_alive(path)
    ]


def _cgroup_parents() -> list[str]:
    try:
        return list(cgroup.parents().values())
    except OSError:
        return []
