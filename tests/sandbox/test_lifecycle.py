"""The contract with the runtime: startup report, CPU clock, kill, cleanup, failure, fallbacks.

The first test is written the way the supervisor will use the sandbox, without the harness.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

from ember.runtime.sandbox import (
    ANONYMOUS,
    DEV,
    EXIT_SANDBOX_FAILED,
    FULL,
    Layer,
    LayerReport,
    MinimumLayersMissing,
    SandboxError,
    cpu_seconds,
    enter,
    kill_worker,
    read_startup,
)
from ember.runtime.sandbox import cgroup as cgroups
from tests.sandbox import attacks
from tests.sandbox.cases import BASE, NAMESPACES, for_profile, sandbox_spec
from tests.sandbox.conftest import Tenants, data_in_use
from tests.sandbox.harness import Run, run_sandboxed


def _need(report: LayerReport, *layers: Layer) -> None:
    missing = [layer.value for layer in layers if layer not in report.available()]
    if missing:
        pytest.skip(f"this host lacks {', '.join(missing)}")


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # (ESRCH: reaped between open and read)
        return None


def _wait_gone(pid: int, timeout_s: float = 3.0, *, reaped: bool = False) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _state(pid) in ((None,) if reaped else (None, "Z", "X")):
            return True
        time.sleep(0.005)
    return False


def test_supervisor_watches_cpu_and_kills_the_worker(
    report: LayerReport, tenants: Tenants, pool_uid: int
) -> None:
    spec = for_profile(
        FULL,
        report,
        deployment_id="a",
        code_dir=tenants.code_a,
        uid=pool_uid if report.euid == 0 else None,
    )
    supervisor_end, worker_end = socket.socketpair()
    report_r, report_w = os.pipe()
    zygote_child = os.fork()
    if zygote_child == 0:  # what the zygote's fork runs
        try:
            supervisor_end.close()
            os.close(report_r)
            enter(spec, worker_end.fileno(), report_fd=report_w)
            worker_end.sendall(b"ready")
            attacks.spin(30.0)  # the handler that never ends
        finally:
            os._exit(0)
    worker_end.close()
    os.close(report_w)
    try:
        startup = read_startup(report_r)
        assert startup.monitor_pid == zygote_child  # the forked child became the monitor
        assert startup.applied.host_pid == startup.worker_pid  # the worker knows it too
        assert supervisor_end.recv(5) == b"ready"
        start = cpu_seconds(startup.worker_pid)
        deadline = time.monotonic() + 5.0
        while cpu_seconds(startup.worker_pid) - start < 0.05 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cpu_seconds(startup.worker_pid) - start >= 0.05  # the clock sees the spin
        kill_worker(startup)
        supervisor_end.settimeout(5.0)
        assert supervisor_end.recv(1) == b""  # EOF: no other process holds the worker's end
        _, status = os.waitpid(zygote_child, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL  # mirrored
        assert _state(startup.worker_pid) is None
        assert not any(os.path.exists(path) for path in startup.cgroups)
    finally:
        os.close(report_r)
        supervisor_end.close()


def test_killing_the_monitor_takes_the_worker_down(report: LayerReport, tenants: Tenants) -> None:
    _need(report, Layer.PID_NS)
    spec = for_profile(FULL, report, deployment_id="a", code_dir=tenants.code_a)
    seen: dict[str, object] = {}

    def kill_monitor(run: Run) -> None:
        assert run.startup is not None and run.startup.monitor_pid is not None
        os.kill(run.startup.monitor_pid, signal.SIGKILL)
        seen["gone"] = _wait_gone(run.startup.worker_pid)

    run = run_sandboxed(spec, attacks.spin, 30.0, on_start=kill_monitor, read_result=False)
    assert seen["gone"] is True  # PR_SET_PDEATHSIG
    # Orphaned, the dead worker is reaped by the nearest subreaper (the zygote, in ember) or
    # by init here.
    assert _wait_gone(run.startup.worker_pid, reaped=True)
    # The monitor could not clean up: its parent removes the groups named in the report.
    assert cgroups.remove(run.startup.cgroups) == []
    assert not any(os.path.exists(path) for path in run.startup.cgroups)


def test_a_failing_layer_is_reported_and_user_code_never_runs(
    report: LayerReport, tenants: Tenants
) -> None:
    _need(report, Layer.IPC_UTS_NS, Layer.PID_NS)
    spec = sandbox_spec(
        deployment_id="a",
        code_dir=tenants.code_a,
        hostname="x" * 100,
        layers=BASE | {Layer.PID_NS, Layer.IPC_UTS_NS},
    )
    run = run_sandboxed(spec, attacks.self_test)
    assert isinstance(run.error, SandboxError)
    assert run.error.stage == "ipc_uts_ns"  # sethostname() in the worker, after the fork
    assert run.result is None
    assert os.waitstatus_to_exitcode(run.exit_status) == EXIT_SANDBOX_FAILED  # mirrored
    assert run.leftovers == []


def test_a_missing_code_dir_fails_before_forking(tenants: Tenants) -> None:
    spec = sandbox_spec(
        deployment_id="a", code_dir=tenants.base / "missing", layers=BASE | NAMESPACES
    )
    run = run_sandboxed(spec, attacks.self_test)
    assert run.error is not None and run.error.stage == "mount_ns"
    assert "missing is not a directory" in str(run.error)
    assert os.waitstatus_to_exitcode(run.exit_status) == EXIT_SANDBOX_FAILED


def test_a_memory_limit_below_what_the_child_holds_is_refused(tenants: Tenants) -> None:
    spec = sandbox_spec(deployment_id="a", code_dir=tenants.code_a, memory_limit=16 << 20)
    run = run_sandboxed(spec, attacks.self_test)
    assert run.error is not None and run.error.stage == "rlimits"
    assert "counts the zygote's memory" in str(run.error)


def test_enter_refuses_a_spec_below_the_anonymous_minimum(tenants: Tenants) -> None:
    spec = sandbox_spec(
        deployment_id="a",
        code_dir=tenants.code_a,
        require_minimum=True,
        layers=BASE | {Layer.NET_NS, Layer.SECCOMP},
        profile_name="anonymous",
    )
    run = run_sandboxed(spec, attacks.self_test)
    assert run.error is not None and run.error.stage == "minimum"
    assert "pid_ns, mount_ns" in str(run.error)
    assert run.result is None


def test_forcing_layers_off_falls_back_and_can_refuse(
    report: LayerReport, tenants: Tenants
) -> None:
    _need(report, Layer.PID_NS, Layer.NET_NS, Layer.MOUNT_NS, Layer.SECCOMP, Layer.LANDLOCK)
    no_landlock = for_profile(
        ANONYMOUS,
        report,
        deployment_id="a",
        code_dir=tenants.code_a,
        disabled=frozenset({Layer.LANDLOCK}),
    )
    assert Layer.LANDLOCK not in no_landlock.layers and Layer.SECCOMP in no_landlock.layers
    run = run_sandboxed(no_landlock, attacks.self_test)
    assert run.error is None and run.result["pid"] == 1
    assert run.startup.applied.layers == no_landlock.layers
    # Without pid and mount namespaces the other minimum (seccomp + Landlock) still holds...
    walls = for_profile(
        ANONYMOUS,
        report,
        deployment_id="a",
        code_dir=tenants.code_a,
        disabled=frozenset({Layer.PID_NS, Layer.MOUNT_NS}),
    )
    assert {Layer.SECCOMP, Layer.LANDLOCK} <= walls.layers
    # ...until one of those goes too: refused, naming what is missing.
    with pytest.raises(MinimumLayersMissing) as refused:
        for_profile(
            ANONYMOUS,
            report,
            deployment_id="a",
            code_dir=tenants.code_a,
            disabled=frozenset({Layer.PID_NS, Layer.LANDLOCK}),
        )
    assert refused.value.missing == ("pid_ns",)


def test_dev_profile_is_hygiene_and_limits_only(report: LayerReport, tenants: Tenants) -> None:
    spec = for_profile(
        DEV,
        report,
        deployment_id="a",
        code_dir=tenants.code_a,
        env={"EMBER_VAR": "visible"},
        memory_limit=data_in_use() + 64 * 1024 * 1024,
    )
    assert spec.layers == BASE

    def look() -> dict:
        return {
            "pid": os.getpid(),
            "sid": os.getsid(0),
            "env": dict(os.environ),
            "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
            "umask": os.umask(0o077),
            "memory": attacks.memory_bomb(16, 16)["big"],
        }

    run = run_sandboxed(spec, look)
    assert run.startup.monitor_pid is None  # no fork: the caller is the worker
    assert run.startup.applied.host_pid == run.startup.worker_pid
    assert run.result["pid"] == run.startup.worker_pid == run.result["sid"]  # own session
    assert run.result["env"] == {"EMBER_VAR": "visible"}
    assert len(run.result["fds"]) == 5  # stdio on /dev/null, the IPC socket, the listing
    assert run.result["umask"] == 0o077
    assert run.result["memory"] == "MemoryError"


def test_cgroup_pids_limit_stops_a_fork_bomb_of_root(report: LayerReport, tenants: Tenants) -> None:
    _need(report, Layer.CGROUP, Layer.PID_NS)
    spec = sandbox_spec(
        deployment_id="a",
        code_dir=tenants.code_a,
        nproc=8,
        layers=BASE | {Layer.PID_NS, Layer.CGROUP},
    )
    groups: dict[str, list[str]] = {}

    def look(run: Run) -> None:
        groups["paths"] = [p for p in run.startup.cgroups if os.path.isdir(p)]

    run = run_sandboxed(spec, attacks.fork_bomb, 50, 2.0, while_alive=look)
    assert run.result["failure"] == "EAGAIN"  # pids.max applies to root, unlike NPROC
    assert run.result["forked"] < 8
    assert len(groups["paths"]) == 3
    assert not any(os.path.exists(p) for p in groups["paths"])  # removed by the monitor
    assert run.leftovers == []


def test_remove_stale_takes_only_groups_of_dead_monitors(report: LayerReport) -> None:
    _need(report, Layer.CGROUP)
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    limits = cgroups.CgroupLimits(64 << 20, 8, None)
    stale = cgroups.create(cgroups.group_name("stale", dead), limits)
    live = cgroups.create(cgroups.group_name("live", os.getpid()), limits)
    try:
        removed = cgroups.remove_stale()
        assert set(stale) <= set(removed)
        assert all(os.path.isdir(path) for path in live)
    finally:
        assert cgroups.remove(live) == []
        cgroups.remove(stale)


def test_unprivileged_caller_cannot_ask_for_a_pool_uid(
    tenants: Tenants, unpriv_uid: int | None
) -> None:
    spec = sandbox_spec(
        deployment_id="a", code_dir=tenants.code_a, uid=4242, layers=BASE | {Layer.UID}
    )
    run = run_sandboxed(spec, attacks.self_test, as_uid=unpriv_uid)
    assert run.error is not None and run.error.stage == "uid"
    assert "need root" in str(run.error)


def test_closing_the_supervisor_end_ends_an_idle_worker(
    report: LayerReport, tenants: Tenants
) -> None:
    spec = for_profile(FULL, report, deployment_id="a", code_dir=tenants.code_a)
    run = run_sandboxed(spec, lambda: {"idle": True}, linger=True)
    assert run.result == {"idle": True}
    assert os.waitstatus_to_exitcode(run.exit_status) == 0  # exited on EOF, mirrored
    assert run.leftovers == []


def test_code_dir_is_mounted_read_only_at_app(report: LayerReport, tenants: Tenants) -> None:
    _need(report, Layer.MOUNT_NS)
    spec = for_profile(FULL, report, deployment_id="a", code_dir=tenants.code_a)

    def look() -> dict:
        return {
            "files": os.listdir("/app"),
            "source": Path("/app/worker.py").read_text(),
            "write": attacks.errno_of(lambda: open("/app/worker.py", "a")),
        }

    run = run_sandboxed(spec, look)
    assert run.startup.applied.code_dir == "/app"
    assert run.result["files"] == ["worker.py"]
    assert "async def fetch" in run.result["source"]
    assert run.result["write"] in ("EROFS", "EACCES")


def test_the_callers_signal_setup_is_forgotten(report: LayerReport, tenants: Tenants) -> None:
    """A zygote running asyncio has a wakeup fd and handlers; none may reach the worker."""
    import asyncio

    spec = for_profile(FULL, report, deployment_id="a", code_dir=tenants.code_a)

    def zygote_like_then_look() -> dict:
        return {
            "wakeup": signal.set_wakeup_fd(-1),
            "term": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
            "int": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
            "hup": signal.getsignal(signal.SIGHUP) == signal.SIG_DFL,
            "pipe": signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN,
            "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        }

    loop = asyncio.new_event_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: None)  # sets a wakeup fd, like uvicorn
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the zygote does
    previous_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        run = run_sandboxed(spec, zygote_like_then_look)
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGHUP, previous_hup)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        loop.remove_signal_handler(signal.SIGTERM)
        loop.close()
    assert run.result == {
        "wakeup": -1,
        "term": True,
        "int": True,
        "hup": True,
        "pipe": True,
        "blocked": [],
    }


def test_many_quick_workers_all_stay_up_after_ready(report: LayerReport, tenants: Tenants) -> None:
    """Workers spawned back to back all stay up once ready.

    bench/sandbox.py once saw 2 of 20 such workers die: a worker that finished before its
    monitor wrote the go byte closed the lifeline, the monitor's write failed (EPIPE) and it
    killed the healthy worker. The byte is now written only with cgroups, when the worker waits
    for it. That race needs a monitor descheduled for ~10 ms, so this test may miss it."""
    _need(report, Layer.PID_NS)
    spec = for_profile(
        FULL, report, deployment_id="a", code_dir=tenants.code_a, disabled=frozenset({Layer.CGROUP})
    )
    alive = []
    for _ in range(12):
        ours, theirs = socket.socketpair()
        report_r, report_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                os.close(report_r)
                enter(spec, theirs.fileno(), report_fd=report_w)
                theirs.sendall(b"r")
                theirs.recv(1)
            finally:
                os._exit(0)
        theirs.close()
        os.close(report_w)
        assert ours.recv(1) == b"r"
        read_startup(report_r)
        os.close(report_r)
        alive.append((ours, pid))
    time.sleep(0.3)
    try:
        assert [os.waitpid(pid, os.WNOHANG) for _, pid in alive] == [(0, 0)] * len(alive)
    finally:
        for ours, _ in alive:
            ours.close()
        statuses = [os.waitpid(pid, 0)[1] for _, pid in alive]
    assert statuses == [0] * len(alive)
