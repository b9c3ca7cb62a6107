"""Reaching out: other tenants' files, the state database, /proc and the environment, the
network, the supervisor's and other isolates' sockets, signals and ptrace.

Network traffic only ever targets listeners this test opens on 127.0.0.1 / ::1.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.runtime.sandbox import Layer
from tests.security.handlers import handler
from tests.security.platform import (
    B_SECRET,
    SUPERVISOR_CANARY,
    ZYGOTE_CANARY,
    Guard,
    Platform,
)

ROOT = Path(__file__).resolve().parents[2]

FILES = handler(
    """
    async def attack(request, env):
        reads = json.loads(request.headers["x-read"])
        writes = json.loads(request.headers["x-write"])
        def write(path):
            # A MiB at a time: one 64 MiB buffer cost enough CPU on a loaded box to meet the
            # worker's CPU limit before the file limit was reached.
            chunk = b"x" * (1 << 20)
            with open(path, "wb") as handle:
                return sum(handle.write(chunk) for _ in range(int(request.headers["x-write-mib"])))
        return report(
            reads={path: outcome(lambda p=path: open(p, "rb").read(64)) for path in reads},
            writes={path: outcome(lambda p=path: write(p)) for path in writes},
            root=outcome(lambda: sorted(os.listdir("/"))),
        )
    """
)

PROC = handler(
    """
    def read(path):
        with open(path, "rb") as handle:
            return handle.read(4096)

    async def attack(request, env):
        targets = json.loads(request.headers["x-pids"])
        probes = {"environ": dict(os.environ), "pids": outcome(lambda: sorted(
            p for p in os.listdir("/proc") if p.isdigit()))}
        for name, pid in targets.items():
            for part in ("environ", "cmdline", "mem", "maps"):
                probes[f"{name}/{part}"] = outcome(lambda p=f"/proc/{pid}/{part}": read(p))
            probes[f"{name}/fd"] = outcome(lambda p=f"/proc/{pid}/fd": os.listdir(p))
        for part in ("environ", "cmdline"):
            probes[f"self/{part}"] = outcome(lambda p=f"/proc/self/{part}": read(p))
        return Response(json.dumps(probes, default=repr))
    """
)

NETWORK = handler(
    """
    import socket

    def tcp(family, host, port):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(1)
            sock.connect((host, port))
            return "connected"

    def udp(port):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("127.0.0.1", port))
            return sock.send(b"leak")

    async def attack(request, env):
        ports = json.loads(request.headers["x-ports"])
        return report(
            tcp4=outcome(lambda: tcp(socket.AF_INET, "127.0.0.1", ports["tcp4"])),
            tcp6=outcome(lambda: tcp(socket.AF_INET6, "::1", ports["tcp6"])),
            udp=outcome(lambda: udp(ports["udp"])),
            interfaces=outcome(socket.if_nameindex),
        )
    """
)

UNIX = handler(
    """
    import socket

    def connect(address):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1)
            sock.connect(address)
            return "connected"

    def visible_abstract():
        with open("/proc/net/unix") as handle:
            return [line.split()[-1] for line in handle if line.split()[-1].startswith("@")]

    async def attack(request, env):
        targets = json.loads(request.headers["x-unix"])
        found = []
        try:
            found = visible_abstract()[:50]
        except OSError:
            pass
        return report(
            path=outcome(lambda: connect(targets["path"])),
            abstract=outcome(lambda: connect("\\0" + targets["abstract"])),
            visible=found,
            others=[outcome(lambda a=a: connect("\\0" + a[1:])) for a in found],
            other_fds=[outcome(lambda n=n: os.open(f"/proc/{targets['b']}/fd/{n}", os.O_RDWR))
                       for n in range(8)],
        )
    """
)

SIGNALS = handler(
    """
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206

    def ptrace(request, pid):
        if libc.ptrace(request, pid, None, None) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        return "attached"

    def kill(pid, sig):
        os.kill(pid, sig)
        return "delivered"

    async def attack(request, env):
        if request.headers["x-attack"] == "group":
            return report(group=outcome(lambda: kill(0, signal.SIGKILL)))
        targets = json.loads(request.headers["x-pids"])
        result = {}
        for name, pid in targets.items():
            result[f"{name}/probe"] = outcome(lambda p=pid: kill(p, 0))
            # SIGWINCH: the same permission check as SIGKILL, harmless if it got through.
            result[f"{name}/winch"] = outcome(lambda p=pid: kill(p, signal.SIGWINCH))
            result[f"{name}/seize"] = outcome(lambda p=pid: ptrace(PTRACE_SEIZE, p))
            result[f"{name}/attach"] = outcome(lambda p=pid: ptrace(PTRACE_ATTACH, p))
        result["everyone"] = outcome(lambda: kill(-1, signal.SIGKILL))
        return report(**result)
    """
)


def _layers(platform: Platform) -> frozenset[Layer]:
    process = platform.supervisor.isolate(platform.canary_id)
    assert process is not None and process.sandbox is not None
    return process.sandbox.applied.layers


def _canary_pids(platform: Platform) -> dict[str, int]:
    process = platform.supervisor.isolate(platform.canary_id)
    assert process is not None
    return {
        "supervisor": os.getpid(),
        "zygote": platform.zygote_pid,
        "b_worker": process.pid,
        "b_monitor": process.spawn_pid,
    }


def test_other_tenants_files_and_the_state_database_are_out_of_reach(
    fallback_guard: Guard,
) -> None:
    platform = fallback_guard.platform
    attacker = fallback_guard.attacker(FILES)
    attacker.warm()
    reads = [
        str(platform.canary_root / "worker.py"),  # another tenant's code
        str(platform.kv_file),  # the state database
        str(platform.base / "state"),
        str(ROOT / "pyproject.toml"),  # the host's repository tree
        "/etc/shadow",
        "/root/.bash_history",
    ]
    writes = [str(platform.canary_root / "worker.py"), "/app/worker.py", str(platform.base / "x")]
    headers = {"x-read": json.dumps(reads), "x-write": json.dumps(writes), "x-write-mib": "1"}
    reply = attacker.attack("files", headers=headers)
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert B_SECRET not in reply.text
    for path, what in {**result["reads"], **result["writes"]}.items():
        assert not what.startswith("ok"), f"{path}: {what}"
        assert what.split(":")[0] in ("FileNotFoundError", "PermissionError", "OSError"), what
    if Layer.MOUNT_NS in _layers(platform):  # a private root: only the runtime and /app
        assert set(json.loads(result["root"][4:].replace("'", '"'))) <= {
            "app",
            "dev",
            "etc",
            "lib",
            "lib32",
            "lib64",
            "libx32",
            "proc",
            "tmp",
            "usr",
            *{Path(p).parts[1] for p in (str(ROOT), os.path.realpath(os.__file__))},
        }
    assert (platform.canary_root / "worker.py").read_text().count("KV.put") == 1
    attacker.served_again()


def test_private_temp_dir_is_capped(guard: Guard) -> None:
    attacker = guard.attacker(FILES)
    attacker.warm()
    headers = {"x-read": "[]", "x-write": json.dumps(["/tmp/fill"]), "x-write-mib": "64"}
    reply = attacker.attack("fill", headers=headers)
    result = reply.json()["writes"]["/tmp/fill"]
    # RLIMIT_FSIZE (8 MiB) or the 16 MiB tmpfs: never 64 MiB of the host's disk.
    assert result.startswith(("OSError: [Errno 27]", "OSError: [Errno 28]")), result
    attacker.served_again()


def test_environment_and_proc_reveal_nothing_of_the_host(fallback_guard: Guard) -> None:
    platform = fallback_guard.platform
    attacker = fallback_guard.attacker(PROC, config="vars:\n  GREETING: hi\n")
    attacker.warm()
    reply = attacker.attack("proc", headers={"x-pids": json.dumps(_canary_pids(platform))})
    assert reply.status_code == 200, reply.text
    for canary in (B_SECRET, SUPERVISOR_CANARY, ZYGOTE_CANARY, str(platform.base)):
        assert canary not in reply.text
    probes = reply.json()
    assert set(probes["environ"]) <= {"PATH", "LANG", "PYTHONIOENCODING", "GREETING"}
    for name in _canary_pids(platform):
        for part in ("environ", "cmdline", "mem", "maps", "fd"):
            assert not probes[f"{name}/{part}"].startswith("ok"), (name, part, probes)
    if Layer.PID_NS in _layers(platform):
        assert probes["pids"] == "ok: ['1']"
    attacker.served_again()


@pytest.fixture
def listeners() -> Iterator[dict[str, socket.socket]]:
    """Loopback listeners standing for the supervisor's: TCP on 127.0.0.1 and ::1, UDP."""
    opened = {
        "tcp4": socket.create_server(("127.0.0.1", 0)),
        "udp": socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
    }
    opened["udp"].bind(("127.0.0.1", 0))
    try:
        opened["tcp6"] = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        opened["tcp6"] = socket.create_server(("127.0.0.1", 0))  # no IPv6 here: keep the key
    for sock in opened.values():
        sock.setblocking(False)
    try:
        yield opened
    finally:
        for sock in opened.values():
            sock.close()


def _nothing_arrived(sock: socket.socket) -> bool:
    try:
        if sock.type == socket.SOCK_DGRAM:
            sock.recv(64)
        else:
            sock.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def test_no_outbound_connections(
    fallback_guard: Guard, listeners: dict[str, socket.socket]
) -> None:
    attacker = fallback_guard.attacker(NETWORK)
    attacker.warm()
    ports = {name: sock.getsockname()[1] for name, sock in listeners.items()}
    reply = attacker.attack("network", headers={"x-ports": json.dumps(ports)})
    assert reply.status_code == 200, reply.text
    result = reply.json()
    for name in ("tcp4", "tcp6", "udp"):
        assert not result[name].startswith("ok"), (name, result)
    assert all(_nothing_arrived(sock) for sock in listeners.values())
    layers = _layers(fallback_guard.platform)
    if Layer.NET_NS in layers and Layer.SECCOMP not in layers:  # seccomp refuses netlink
        assert result["interfaces"] == "ok: [(1, 'lo')]"
    attacker.served_again()


def test_supervisor_and_other_isolate_sockets_are_unreachable(fallback_guard: Guard) -> None:
    platform = fallback_guard.platform
    private = platform.base / "sockets"
    private.mkdir(mode=0o700)  # as the supervisor keeps its state
    path_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path_listener.bind(str(private / "control.sock"))
    os.chmod(private / "control.sock", 0o777)
    abstract = f"ember-security-{uuid.uuid4().hex}"
    abstract_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_listener.bind("\0" + abstract)
    with path_listener, abstract_listener:
        for sock in (path_listener, abstract_listener):
            sock.listen(4)
            sock.setblocking(False)
        attacker = fallback_guard.attacker(UNIX)
        attacker.warm()
        targets = {
            "path": str(private / "control.sock"),
            "abstract": abstract,
            "b": _canary_pids(platform)["b_worker"],
        }
        reply = attacker.attack("unix", headers={"x-unix": json.dumps(targets)})
        assert reply.status_code == 200, reply.text
        result = reply.json()
        assert not result["path"].startswith("ok"), result
        assert not result["abstract"].startswith("ok"), result
        assert not any(what.startswith("ok") for what in result["others"]), result
        assert not any(what.startswith("ok") for what in result["other_fds"]), result
        assert _nothing_arrived(path_listener) and _nothing_arrived(abstract_listener)
    attacker.served_again()


def test_signals_and_ptrace_reach_no_other_process(fallback_guard: Guard) -> None:
    platform = fallback_guard.platform
    attacker = fallback_guard.attacker(SIGNALS)
    before = attacker.warm()
    targets = _canary_pids(platform)
    reply = attacker.attack("signals", headers={"x-pids": json.dumps(targets)})
    assert reply.status_code == 200, reply.text
    result = reply.json()
    for name in targets:
        for action in ("probe", "winch", "seize", "attach"):
            what = result[f"{name}/{action}"]
            assert what.split(":")[0] in ("ProcessLookupError", "PermissionError", "OSError"), (
                name,
                action,
                what,
            )
            assert "[Errno 3]" in what or "[Errno 1]" in what, (name, action, what)
    # kill(-1) answers 0 whenever it *tried* some process, even if every try was EPERM (as
    # without a pid namespace): what counts is that B, the zygote and we are untouched.
    attacker.served_again()
    # kill(0): its own process group, which is only itself (own session). As pid 1 of its
    # namespace it ignores even that; without a pid namespace it kills itself, nobody else.
    group = attacker.attack("group")
    if Layer.PID_NS in _layers(platform):
        assert group.status_code == 200, group.text
        attacker.served_again()
    else:
        assert (group.status_code, group.headers.get("x-ember-error")) == (502, "crashed")
        attacker.served_again(fresh_from=before)
    assert all(os.path.exists(f"/proc/{pid}") for pid in targets.values())
    assert _canary_pids(platform) == targets  # B's worker and the zygote are the same processes
