"""Hostile handler code, run inside sandboxed workers (isolation.md §7). Each returns JSON.

All loops and counts are bounded, and the only addresses used are loopback ones the test opened.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import random
import socket
import struct
import subprocess
import threading
import time
from typing import Any

from tests.sandbox.harness import errno_of


def self_test() -> dict[str, Any]:
    """The sandbox self-test: what every worker must look like from inside."""
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait) for _ in range(3)]
    for thread in threads:
        thread.start()
    statuses = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/status") as handle:
            fields = dict(line.split(":", 1) for line in handle.read().splitlines())
        statuses[tid] = {k: fields[k].strip() for k in ("Seccomp", "NoNewPrivs", "CapEff")}
    stop.set()
    for thread in threads:
        thread.join()
    with open("/proc/self/net/dev") as handle:
        interfaces = [line.split(":")[0].strip() for line in handle.read().splitlines()[2:]]
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    request = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(probe.fileno(), 0x8913, request))[1]
    probe.close()
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "threads": statuses,
        "interfaces": interfaces,
        "lo_up": bool(flags & 1),
        "root": sorted(os.listdir("/")),
        "root_write": errno_of(lambda: open("/x", "w")),
        "proc": sorted(p for p in os.listdir("/proc") if p.isdigit()),
        "hostname": socket.gethostname(),
        "random": random.random(),
        "env": dict(os.environ),
        "uid": os.getuid(),
        "cwd": os.getcwd(),
        "mounts": _mount_points(),
    }


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as handle:
        return [line.split()[4] for line in handle]


def read_paths(paths: list[str]) -> dict[str, Any]:
    """Try to read each path (file contents or a directory listing)."""

    def read(path: str) -> object:
        if os.path.isdir(path):
            return os.listdir(path)
        with open(path, "rb") as handle:
            return handle.read(64)

    return {path: errno_of(lambda path=path: read(path)) for path in paths}


def environment_leaks(canary: str) -> dict[str, Any]:
    libc = ctypes.CDLL(None, use_errno=True)

    def make_dumpable() -> None:  # undo PR_SET_DUMPABLE 0, which closes /proc/self/environ
        if libc.prctl(4, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    dumpable = errno_of(make_dumpable)
    found = {}
    for path in ("/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline"):
        try:
            with open(path, "rb") as handle:
                found[path] = canary.encode() in handle.read()
        except OSError as exc:
            found[path] = f"errno {exc.errno}"
    return {"environ": dict(os.environ), "found": found, "dumpable": dumpable}


def fork_bomb(count: int, sleep_s: float) -> dict[str, Any]:
    forked, failure = 0, "none"
    for _ in range(count):
        try:
            pid = os.fork()
        except OSError as exc:
            failure = errno.errorcode.get(exc.errno or 0, str(exc))
            break
        if pid == 0:
            time.sleep(sleep_s)
            os._exit(0)
        forked += 1
    return {"forked": forked, "failure": failure}


def exec_attempts() -> dict[str, Any]:
    return {
        "subprocess": errno_of(lambda: subprocess.run(["/bin/sh", "-c", "id"], check=False)),
        "execv": errno_of(lambda: os.execv("/usr/bin/id", ["id"])),
        "posix_spawn": errno_of(lambda: os.posix_spawn("/usr/bin/id", ["id"], {})),
    }


def network(tcp_port: int, tcp6_port: int | None, unix_path: str, abstract: str) -> dict[str, Any]:
    def tcp(family: int, host: str, port: int) -> None:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect((host, port))

    def udp() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("127.0.0.1", tcp_port))  # route resolution only, no packet

    def unix(address: str) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect(address)

    def raw() -> None:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()

    result = {
        "tcp4": errno_of(lambda: tcp(socket.AF_INET, "127.0.0.1", tcp_port)),
        "udp": errno_of(udp),
        "unix_path": errno_of(lambda: unix(unix_path)),
        "abstract": errno_of(lambda: unix("\0" + abstract)),
        "packet": errno_of(raw),
        "bind_tcp": errno_of(lambda: socket.create_server(("127.0.0.1", 0)).close()),
    }
    if tcp6_port is not None:
        result["tcp6"] = errno_of(lambda: tcp(socket.AF_INET6, "::1", tcp6_port))
    return result


def signal_and_trace(target_pid: int) -> dict[str, Any]:
    libc = ctypes.CDLL(None, use_errno=True)

    def ptrace_seize() -> None:
        if libc.ptrace(0x4206, target_pid, None, None) != 0:  # PTRACE_SEIZE
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def vm_read() -> None:
        buf = ctypes.create_string_buffer(8)
        local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
        remote = (ctypes.c_void_p * 2)(0x400000, 8)
        if libc.process_vm_readv(target_pid, local, 1, remote, 1, 0) < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return {
        "kill0": errno_of(lambda: os.kill(target_pid, 0)),
        "ptrace": errno_of(ptrace_seize),
        "process_vm_readv": errno_of(vm_read),
        "kill_minus1": errno_of(lambda: os.kill(-1, 0)),
    }


def memory_bomb(chunk_mib: int, max_chunks: int) -> dict[str, Any]:
    big = errno_of(lambda: bytearray(8 << 30))
    chunks = []
    outcome = "limit not reached"
    try:
        for _ in range(max_chunks):
            chunks.append(bytearray(chunk_mib << 20))
    except MemoryError:
        outcome = "MemoryError"
    allocated = len(chunks) * chunk_mib
    del chunks
    return {"big": big, "chunks": outcome, "allocated_mib": allocated, "alive_after": True}


def fill_temp(temp_dir: str, total_mib: int) -> dict[str, Any]:
    written = 0
    outcome = "ok"
    block = b"x" * (1 << 20)
    try:
        with open(os.path.join(temp_dir, "fill"), "wb") as handle:
            for _ in range(total_mib):
                handle.write(block)
                handle.flush()
                written += 1
    except OSError as exc:
        outcome = errno.errorcode.get(exc.errno or 0, str(exc))
    return {
        "written_mib": written,
        "outcome": outcome,
        "root": errno_of(lambda: open("/fill", "wb")),
        "app": errno_of(lambda: open("/app/fill", "wb")),
    }


def spinning_grandchild() -> dict[str, Any]:
    """Fork a child that spins for a bounded time, then return (the worker lingers)."""
    try:
        pid = os.fork()
    except OSError as exc:
        return {"fork": errno.errorcode.get(exc.errno or 0, str(exc))}
    if pid == 0:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pass
        os._exit(0)
    return {"fork": "ok", "child": pid}


def thread_flood(count: int) -> dict[str, Any]:
    stop = threading.Event()
    started = []
    failure = "none"
    for _ in range(count):
        thread = threading.Thread(target=stop.wait)
        try:
            thread.start()
        except (RuntimeError, MemoryError) as exc:
            failure = type(exc).__name__
            break
        started.append(thread)
    stop.set()
    for thread in started:
        thread.join()
    return {"started": len(started), "failure": failure}


def spin(seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    return {"spun": seconds}


def fd_flood(count: int) -> dict[str, Any]:
    opened = []
    outcome = "none"
    try:
        for _ in range(count):
            opened.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as exc:
        outcome = errno.errorcode.get(exc.errno or 0, str(exc))
    for fd in opened:
        os.close(fd)
    return {"opened": len(opened), "outcome": outcome}
