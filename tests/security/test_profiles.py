"""The seam: a deployment runs under the profile given to ``Supervisor.deploy``; refusals,
the operator's override, pool uids, sandbox failures and the startup report."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.errors import LimitExceeded
from ember.runtime import events as E
from ember.runtime.isolation import SandboxPolicy, grant_code_access
from ember.runtime.monitor import process_parent
from ember.runtime.sandbox import ANONYMOUS, DEV, FULL, Layer, MinimumLayersMissing, probe
from ember.runtime.uidpool import UidRange, processes_of
from tests.runtime.harness import Harness, write_project
from tests.security.platform import Platform

HELLO = """
import os
from workers import Response

async def fetch(request, env):
    return Response(f"{os.getpid()} {os.getuid()} {os.getcwd()}")
"""
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="pool uids need root")


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[list[Harness]]:
    """Supervisors made by a test, closed after it."""
    made: list[Harness] = []
    yield made
    for harness in made:
        harness.close()


def _harness(bare: list[Harness], tmp_path: Path, policy: SandboxPolicy | None) -> Harness:
    options = {} if policy is None else {"sandbox": policy}
    harness = Harness(tmp_path / f"state-{len(bare)}", dev=False, **options)
    bare.append(harness)
    return harness


def _project(tmp_path: Path, name: str = "hello") -> Path:
    root = write_project(tmp_path / "code" / name, HELLO)
    for path in (tmp_path, tmp_path / "code"):
        path.chmod(0o755)
    return root


def test_full_profile_runs_the_worker_as_pid_1_with_every_layer_found(platform: Platform) -> None:
    process = platform.supervisor.isolate(platform.canary_id)
    assert process is not None and process.sandbox is not None
    report = platform.supervisor.sandbox_status().report
    assert report is not None
    assert process.sandbox.applied.layers == report.available()
    assert process.sandbox.worker_pid == process.pid  # the pid polled for CPU and killed
    assert process_parent(process.pid) == process.spawn_pid == process.sandbox.monitor_pid
    assert process.sandbox.applied.code_dir == "/app"
    if Layer.UID in report.available():
        uid = process.sandbox.applied.uid
        first = SandboxPolicy().uids.first  # type: ignore[union-attr]
        assert first <= uid and os.stat(f"/proc/{process.pid}").st_uid == uid
    if Layer.PID_NS in report.available():
        with platform.harness.client(platform.canary_id) as client:
            assert client.get("/").text == "pong"


def test_dev_is_the_default_and_never_probes(bare: list[Harness], tmp_path: Path) -> None:
    harness = _harness(bare, tmp_path, None)
    deployment_id = harness.deploy(_project(tmp_path))
    process = harness.supervisor.isolate(deployment_id)
    assert process is not None and process.sandbox is None and process.pid == process.spawn_pid
    assert harness.supervisor.sandbox_status().report is None
    with harness.client(deployment_id) as client:
        pid, uid, cwd = client.get("/").text.split()
    assert (int(pid), int(uid)) == (process.pid, os.geteuid())
    assert cwd == str(_project(tmp_path).resolve())


def test_profiles_side_by_side_in_one_supervisor(platform: Platform, tmp_path: Path) -> None:
    harness = platform.harness
    ids = {
        profile.name: harness.deploy(_project(tmp_path, profile.name), sandbox=profile)
        for profile in (DEV, FULL, ANONYMOUS)
    }
    try:
        for name, deployment_id in ids.items():
            with harness.client(deployment_id) as client:
                pid, _uid, cwd = client.get("/").text.split()
            process = platform.supervisor.isolate(deployment_id)
            assert process is not None
            if name == "dev":
                assert process.sandbox is None and cwd.endswith("/dev")
            else:
                assert process.sandbox is not None and cwd == "/app"
                assert process.sandbox.applied.profile_name == name
                if Layer.PID_NS in process.sandbox.applied.layers:
                    assert pid == "1"
    finally:
        for deployment_id in ids.values():
            harness.run(platform.supervisor.remove(deployment_id))


def test_anonymous_below_the_minimum_is_refused_unless_the_operator_allows_it(
    bare: list[Harness], tmp_path: Path
) -> None:
    if not probe().minimum().met:
        pytest.skip("the minimum is not met on this host anyway")
    weak = frozenset({Layer.SECCOMP, Layer.LANDLOCK})
    harness = _harness(bare, tmp_path, SandboxPolicy(default_profile=FULL, disabled=weak))
    root = _project(tmp_path)
    live = harness.deploy(root)  # FULL runs with what there is
    deployment = dataclasses.replace(harness.deployment(root), id=live)
    with pytest.raises(MinimumLayersMissing) as refused:
        harness.run(harness.supervisor.deploy(deployment, sandbox=ANONYMOUS))
    assert refused.value.missing == ("seccomp or landlock",)
    assert "seccomp or landlock" in str(refused.value)
    with harness.client(live) as client:  # the version that was live stays live
        assert client.get("/").status_code == 200
    assert harness.supervisor.isolate(live).sandbox.applied.profile_name == "full"  # type: ignore[union-attr]
    lenient = SandboxPolicy(default_profile=FULL, disabled=weak, allow_below_minimum=True)
    other = _harness(bare, tmp_path, lenient)
    accepted = other.deploy(root, sandbox=ANONYMOUS)
    with other.client(accepted) as client:
        assert client.get("/").status_code == 200
    lines = other.supervisor.sandbox_status().lines()
    assert any("ALLOWED BELOW MINIMUM" in line for line in lines)
    assert any(line.strip().startswith("[--] seccomp") for line in lines)


def test_a_sandbox_that_cannot_be_set_up_answers_503_and_is_not_respawned(
    platform: Platform, tmp_path: Path
) -> None:
    harness = platform.harness
    root = _project(tmp_path, "vanishing")
    deployment = harness.deployment(root)
    harness.run(platform.supervisor.deploy(deployment, eager=False))
    (root / "worker.py").unlink()
    (root / "ember.yaml").unlink()
    root.rmdir()  # gone before the first isolate starts: its private root cannot be built
    try:
        with harness.client(deployment.id) as client:
            replies = [client.get("/") for _ in range(3)]
        assert all(r.status_code == 503 for r in replies)
        assert replies[0].headers["x-ember-error"] == "sandbox_failed"
        assert replies[0].text.startswith("Worker sandbox could not be set up.")
        logged = harness.of_type(E.ExceptionEvent, deployment.id)
        assert len(logged) == 1  # started once: the failure is sticky until the next deploy
        assert "mount_ns" in logged[0].message and "is not a directory" in logged[0].message
    finally:
        harness.run(platform.supervisor.remove(deployment.id))


@needs_root
def test_pool_uids_are_per_deployment_and_recycled_only_when_clean(
    bare: list[Harness], tmp_path: Path
) -> None:
    uids = UidRange(first=310_000, count=2, lock_file=tmp_path / "uids.lock")
    harness = _harness(bare, tmp_path, SandboxPolicy(default_profile=FULL, uids=uids))
    pool = harness.supervisor.isolation.pool
    assert pool is not None
    a = harness.deploy(_project(tmp_path, "a"))
    b = harness.deploy(_project(tmp_path, "b"))
    assert sorted(pool.held().values()) == [310_000, 310_001]
    uid_a = pool.uid_of(a)
    with pytest.raises(LimitExceeded, match="no free pool uid in 310000..310001"):
        harness.deploy(_project(tmp_path, "c"))
    assert set(pool.held()) == {a, b}  # the refused deployment holds nothing
    harness.run(harness.supervisor.remove(a))
    harness.wait_for(lambda: pool.uid_of(a) is None)
    assert uid_a is not None and not processes_of(uid_a)
    c = harness.deploy(_project(tmp_path, "c"))
    assert pool.uid_of(c) == uid_a  # recycled, once nothing of a was left
    with harness.client(c) as client:
        assert client.get("/").text.split()[1] == str(uid_a)


@needs_root
def test_a_uid_claimed_by_another_supervisor_is_skipped(
    bare: list[Harness], tmp_path: Path
) -> None:
    lock = tmp_path / "uids.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import fcntl, os, sys
            fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.lockf(fd, fcntl.LOCK_EX, 1, 320000)
            print("held", flush=True)
            sys.stdin.read()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        uids = UidRange(first=320_000, count=3, lock_file=lock)
        harness = _harness(bare, tmp_path, SandboxPolicy(default_profile=FULL, uids=uids))
        deployment_id = harness.deploy(_project(tmp_path))
        assert harness.supervisor.isolation.pool.uid_of(deployment_id) == 320_001  # type: ignore[union-attr]
    finally:
        holder.kill()
        holder.wait()


@needs_root
def test_code_access_is_granted_by_group_and_never_beyond_the_code(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir(mode=0o700)
    (code / "worker.py").write_text("x = 1\n")
    (code / "worker.py").chmod(0o600)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    outside.chmod(0o600)
    (code / "link").symlink_to(outside)
    os.link(outside, code / "hardlink")
    grant_code_access(code, 300_123)
    assert os.stat(code / "worker.py").st_gid == 300_123
    assert os.stat(code / "worker.py").st_mode & 0o777 == 0o640
    assert os.stat(code).st_mode & 0o777 == 0o750
    assert os.stat(outside).st_gid == 0 and os.stat(outside).st_mode & 0o777 == 0o600


def test_startup_report_names_every_layer_and_the_verdict(platform: Platform) -> None:
    status = platform.supervisor.sandbox_status()
    lines = status.lines()
    for layer in Layer:
        assert any(f"] {layer.value} " in line for line in lines), layer
    assert any(line.startswith("anonymous deployments: ") for line in lines)
    assert lines[-1] == "default profile: full"
    assert status.to_dict()["default_profile"] == "full"
