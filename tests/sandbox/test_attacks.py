"""Hostile code in sandboxed workers (isolation.md §7, the attacks that need no runtime).

Every attack runs against four configurations (tests/sandbox/cases.py); each expected errno
names the layer that stops it. After every run no process of the worker's pid namespace or pool
uid may be left.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.sandbox import LayerReport
from tests.sandbox import attacks
from tests.sandbox.cases import CASE_NAMES, Case, make_case, skip_if_no_userns
from tests.sandbox.conftest import Tenants
from tests.sandbox.harness import Run, namespace_members, run_sandboxed

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=CASE_NAMES)
def case(
    request: pytest.FixtureRequest,
    report: LayerReport,
    tenants: Tenants,
    pool_uid: int,
    unpriv_uid: int | None,
    scratch: Path,
) -> Case:
    return make_case(request.param, report, tenants.code_a, pool_uid, unpriv_uid, scratch)


def run(case: Case, attack, *args, **kwargs) -> Run:  # noqa: ANN001
    result = run_sandboxed(case.spec, attack, *args, as_uid=case.as_uid, **kwargs)
    skip_if_no_userns(case, result.error)
    assert result.error is None, result.error
    assert result.result is not None, "the worker sent no result"
    assert "raised" not in result.result, result.result.get("tb")
    return result


def test_fork_bomb_is_stopped_and_leaves_nothing(case: Case) -> None:
    outcome = run(case, attacks.fork_bomb, 200, 3.0)
    if case.seccomp:
        assert outcome.result == {"forked": 0, "failure": "EPERM"}
    else:  # RLIMIT_NPROC of the pool uid (16, the worker included)
        assert outcome.result["failure"] == "EAGAIN"
        assert outcome.result["forked"] < 16
    assert outcome.leftovers == []


def test_exec_and_subprocess_are_denied(case: Case) -> None:
    if not case.seccomp:
        pytest.skip("without seccomp exec would replace the worker (nothing denies it)")
    outcome = run(case, attacks.exec_attempts)
    assert outcome.result == {"subprocess": "EPERM", "execv": "EPERM", "posix_spawn": "EPERM"}


def test_other_tenants_state_and_host_files_are_unreachable(case: Case, tenants: Tenants) -> None:
    targets = [
        str(tenants.secret_b),
        str(tenants.secret_b.parent),
        str(tenants.state_db),
        str(tenants.base),
        str(ROOT / "pyproject.toml"),
        str(ROOT / "tests"),
        "/etc/shadow",
        "/etc/passwd",
        "/home",
        "/var",
        f"/proc/{os.getpid()}/status",
        f"/proc/{os.getpid()}/environ",
    ]
    outcome = run(case, attacks.read_paths, targets)
    expected = "ENOENT" if case.namespaces else "EACCES"
    assert outcome.result == dict.fromkeys(targets, expected)


def test_repo_tree_shows_only_the_ember_package(case: Case) -> None:
    if not case.namespaces:
        pytest.skip("without a mount namespace paths stay visible; Landlock denies reading them")
    outcome = run(case, attacks.read_paths, [str(ROOT)])
    assert outcome.result[str(ROOT)] == "ok"
    listing = run(case, lambda: {"ls": sorted(os.listdir(ROOT))})
    # The Python runtime is mirrored read-only; when its virtualenv lives inside the checkout
    # (as scripts/test makes it), that one directory is visible too, and nothing else.
    expected = {"ember"}
    prefix = Path(sys.prefix).resolve()
    if prefix.is_relative_to(ROOT):
        expected.add(prefix.relative_to(ROOT).parts[0])
    assert listing.result["ls"] == sorted(expected)


def test_environment_holds_only_the_given_variables(case: Case) -> None:
    with open("/proc/self/environ", "rb") as handle:
        exec_env = [entry for entry in handle.read().split(b"\0") if entry]
    canary = max(exec_env, key=len).decode(errors="replace")  # e.g. PATH=..., in the exec block
    outcome = run(case, attacks.environment_leaks, canary)
    assert outcome.result["environ"] == {"EMBER_VAR": "visible"}
    found = outcome.result["found"]
    if case.seccomp:  # prctl(PR_SET_DUMPABLE) is denied: the file stays closed even to itself
        assert outcome.result["dumpable"] == "EPERM"
        assert found["/proc/self/environ"] == "errno 13"
    else:  # the worker made itself dumpable again: the exec-time block must be blank
        assert outcome.result["dumpable"] == "ok"
        assert found["/proc/self/environ"] is False
    assert found["/proc/1/environ"] in (False, "errno 13", "errno 2")


@pytest.fixture
def listeners() -> Iterator[dict[str, socket.socket]]:
    """A TCP listener on 127.0.0.1 (and ::1 if present) and an abstract Unix listener."""
    made = {"tcp4": socket.create_server(("127.0.0.1", 0))}
    try:
        made["tcp6"] = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pass
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0ember-test-{os.getpid()}-{id(abstract)}")
    abstract.listen(4)
    made["abstract"] = abstract
    for sock in made.values():
        sock.setblocking(False)
    try:
        yield made
    finally:
        for sock in made.values():
            sock.close()


def _accepted(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_no_network_and_no_host_sockets(
    case: Case, tenants: Tenants, listeners: dict[str, socket.socket]
) -> None:
    tcp4 = listeners["tcp4"].getsockname()[1]
    tcp6 = listeners["tcp6"].getsockname()[1] if "tcp6" in listeners else None
    abstract = listeners["abstract"].getsockname()[1:].decode()
    outcome = run(case, attacks.network, tcp4, tcp6, tenants.unix_path, abstract)
    result = outcome.result
    if case.seccomp:
        assert result["tcp4"] == result["udp"] == result["packet"] == "EACCES"
        assert result["bind_tcp"] == "EACCES"
        assert result.get("tcp6", "EACCES") == "EACCES"
    else:  # the empty net namespace: loopback is down
        assert result["tcp4"] == result["udp"] == "ENETUNREACH"
        assert result.get("tcp6", "EADDRNOTAVAIL") in ("EADDRNOTAVAIL", "ENETUNREACH")
        assert result["packet"] == "EPERM"  # no CAP_NET_RAW
    if case.namespaces:
        assert result["unix_path"] == "ENOENT"  # not in the private root
        assert result["abstract"] == "ECONNREFUSED"  # abstract names are per net namespace
    else:
        assert result["unix_path"] == "EACCES"  # pool uid: no search right on the dir
        assert result["abstract"] == "EPERM"  # Landlock scopes abstract sockets
    assert {name: _accepted(sock) for name, sock in listeners.items()} == dict.fromkeys(
        listeners, 0
    )


def test_signals_and_ptrace_cannot_reach_the_parent(case: Case) -> None:
    outcome = run(case, attacks.signal_and_trace, os.getpid())
    result = outcome.result
    if case.namespaces:
        assert result["kill0"] == "ESRCH"  # the host pid does not exist in the pid namespace
        assert result["kill_minus1"] == "ESRCH"  # nobody else in it
    else:
        assert result["kill0"] == "EPERM"  # Landlock signal scope (and another uid)
        # kill(-1, 0) reports success even when every target refused (EPERM is not passed
        # on), so only the namespace cases can assert on it.
    if case.seccomp:
        assert result["ptrace"] == result["process_vm_readv"] == "EPERM"
    else:
        assert result["ptrace"] == result["process_vm_readv"] == "ESRCH"


def test_memory_bomb_raises_memory_error_and_worker_survives(case: Case) -> None:
    outcome = run(case, attacks.memory_bomb, 16, 64)
    assert outcome.result["big"] == "MemoryError"
    assert outcome.result["chunks"] == "MemoryError"
    assert outcome.result["allocated_mib"] <= case.spec.memory_limit >> 20
    assert outcome.result["alive_after"] is True


def test_temp_dir_is_size_capped(case: Case) -> None:
    temp = case.spec.host_temp_dir if not case.namespaces else "/tmp"
    outcome = run(case, attacks.fill_temp, str(temp), 64)
    if case.namespaces:
        assert outcome.result["outcome"] == "ENOSPC"  # the 8 MiB tmpfs
        assert outcome.result["written_mib"] <= 8
        assert outcome.result["root"] in ("EROFS", "EACCES")
        assert outcome.result["app"] in ("EROFS", "EACCES")
    else:
        assert outcome.result["outcome"] == "EFBIG"  # RLIMIT_FSIZE, 32 MiB
        assert outcome.result["written_mib"] == 32
        assert outcome.result["root"] == "EACCES"


def test_spinning_grandchild_dies_with_the_worker(case: Case) -> None:
    seen: dict[str, list[int]] = {}

    def inspect(alive: Run) -> None:
        if alive.pid_namespace:
            seen["members"] = namespace_members(alive.pid_namespace)

    outcome = run(case, attacks.spinning_grandchild, linger=True, while_alive=inspect, kill=True)
    if case.seccomp:
        assert outcome.result == {"fork": "EPERM"}
    else:
        assert outcome.result["fork"] == "ok"
        assert len(seen["members"]) == 2  # worker and its spinning child
    assert outcome.leftovers == []


def test_thread_flood_is_bounded(case: Case) -> None:
    outcome = run(case, attacks.thread_flood, 500)
    assert outcome.result["failure"] == "RuntimeError"
    assert outcome.result["started"] < 100


def test_fd_flood_stops_at_the_nofile_limit(case: Case) -> None:
    outcome = run(case, attacks.fd_flood, 5000)
    assert outcome.result["outcome"] == "EMFILE"
    assert outcome.result["opened"] < case.spec.nofile


def test_lifetime_cpu_backstop_kills_a_spinning_worker(
    report: LayerReport, tenants: Tenants, pool_uid: int, scratch: Path
) -> None:
    """RLIMIT_CPU is only a backstop (whole seconds, lifetime): the supervisor polls per
    request, but should it fail, the kernel still ends the worker."""
    case = make_case("full", report, tenants.code_a, pool_uid, None, scratch, cpu_backstop_s=1)
    started = time.monotonic()
    outcome = run_sandboxed(case.spec, attacks.spin, 60.0, timeout_s=50.0)
    assert time.monotonic() - started < 50.0  # the kernel ended it, not the test's timeout
    assert outcome.result is None  # never finished
    assert os.WIFSIGNALED(outcome.exit_status)
    assert os.WTERMSIG(outcome.exit_status) == signal.SIGKILL  # mirrored by the monitor
    assert outcome.leftovers == []
