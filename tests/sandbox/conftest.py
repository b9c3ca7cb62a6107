"""Fixtures for the sandbox suite: the host's layer report, tenant directories, ids."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.sandbox import LayerReport, probe

POOL_UID_BASE = 230000  # a range no account on these machines uses


@pytest.fixture(scope="session")
def report() -> LayerReport:
    return probe()


def free_uid(start: int) -> int:
    """A uid with no process and no passwd entry."""
    import pwd

    used = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                used.add(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                pass
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in used:
                return uid
        uid += 1


@pytest.fixture
def pool_uid() -> int:
    return free_uid(POOL_UID_BASE + os.getpid() % 1000 * 10)


@pytest.fixture
def unpriv_uid() -> int | None:
    """A uid to drop to before entering; None when the suite already runs unprivileged."""
    if os.geteuid() != 0:
        return None
    return free_uid(POOL_UID_BASE + 5000 + os.getpid() % 1000 * 10)


@pytest.fixture
def scratch(pool_uid: int) -> Iterator[Path]:
    """A host directory only the pool uid may write (the temp dir without a mount namespace)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="ember-scratch-", dir="/tmp"))
    if os.geteuid() == 0:
        os.chown(path, pool_uid, pool_uid)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclasses.dataclass
class Tenants:
    base: Path
    code_a: Path  # the attacker's code dir
    secret_b: Path  # another tenant's file
    state_db: Path  # a state database path
    unix_path: str  # a Unix socket the "supervisor" listens on


@pytest.fixture
def tenants(tmp_path: Path) -> Iterator[Tenants]:
    base = tmp_path / "platform"
    code_a = base / "deployments" / "a" / "v1"
    code_a.mkdir(parents=True)
    (code_a / "worker.py").write_text("async def fetch(request, env):\n    return 'hi'\n")
    secret_b = base / "deployments" / "b" / "v1" / "secret.txt"
    secret_b.parent.mkdir(parents=True)
    secret_b.write_text("tenant-b-secret\n")
    state_db = base / "state" / "ember.sqlite3"
    state_db.parent.mkdir()
    state_db.write_bytes(b"SQLite format 3\0")
    for path in (tmp_path, base, code_a.parent, code_a):
        path.chmod(0o755)
    unix_path = str(base / "sup.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(unix_path)
    listener.listen(4)
    try:
        yield Tenants(base, code_a, secret_b, state_db, unix_path)
    finally:
        listener.close()


def data_in_use() -> int:
    """This process's VmData in bytes (a forked worker starts with the same)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0
