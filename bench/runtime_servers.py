"""The servers and the load generator of ``bench/runtime.py``: start, drive, measure CPU.

Both servers are subprocesses on 127.0.0.1: the bare starlette+uvicorn app and ``ember dev
examples/hello`` (with the ``ember`` package of a given checkout). The load generator is raw
keep-alive HTTP/1.1 over asyncio, in the calling process.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BODY = b"Hello, world!"

BARE_APP = """
from starlette.responses import Response

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await Response("Hello, world!", media_type="text/plain;charset=UTF-8")(scope, receive, send)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_bare(port: int, workdir: Path) -> subprocess.Popen[bytes]:
    (workdir / "bare_app.py").write_text(BARE_APP)
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "bare_app:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
        "--lifespan",
        "off",
        "--ws",
        "none",
    ]
    return subprocess.Popen(command, cwd=workdir, stdout=subprocess.DEVNULL)


def start_ember(port: int, state: Path, *extra: str, root: Path = ROOT) -> subprocess.Popen[bytes]:
    """``ember dev examples/hello`` with the ``ember`` package of ``root`` (this checkout's)."""
    command = [
        sys.executable,
        "-m",
        "ember",
        "dev",
        str(root / "examples" / "hello"),
        "--port",
        str(port),
        "--persist-to",
        str(state),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL)


async def wait_ready(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            connection = Connection(port)
            await connection.open()
            body = await connection.get()
            connection.close()
            if body == BODY:
                return
        except OSError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not answer")


class Connection:
    """One keep-alive HTTP/1.1 connection that sends GET / and reads a Content-Length body."""

    REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: ember-bench\r\n\r\n"

    def __init__(self, port: int) -> None:
        self.port = port

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def get(self) -> bytes:
        self.writer.write(self.REQUEST)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"unexpected response {head[:40]!r}")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def latency(port: int, duration: float) -> list[float]:
    """Per-request seconds, one connection, requests back to back."""
    connection = Connection(port)
    await connection.open()
    samples: list[float] = []
    end = time.perf_counter() + duration
    while (start := time.perf_counter()) < end:
        await connection.get()
        samples.append(time.perf_counter() - start)
    connection.close()
    return samples


async def throughput(port: int, duration: float, connections: int) -> float:
    """Requests per second over ``connections`` concurrent keep-alive connections."""
    count = 0
    end = time.perf_counter() + duration

    async def worker() -> None:
        nonlocal count
        connection = Connection(port)
        await connection.open()
        while time.perf_counter() < end:
            await connection.get()
            count += 1
        connection.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return count / (time.perf_counter() - start)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (ember dev: supervisor, zygote, isolates)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    tree, index = [pid], 0
    while index < len(tree):
        tree += children.get(tree[index], [])
        index += 1
    return tree


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of ``pids`` (those still alive)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


COUNTERS = ("reads", "writes", "sleeps", "preempted")


def counters(pid: int) -> tuple[int, int, int, int]:
    """Read and write syscalls, voluntary and involuntary context switches of ``pid`` so far.

    Per request they show the hop: reads per request is one over the frames per read (batch
    size), and an involuntary switch is the process preempted, e.g. by the peer it just woke.
    """
    try:
        io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return (0, 0, 0, 0)
    switches = {k: int(v) for k, v in (line.split(":\t") for line in status if "ctxt" in line)}
    return (
        int(io["syscr"]),
        int(io["syscw"]),
        switches["voluntary_ctxt_switches"],
        switches["nonvoluntary_ctxt_switches"],
    )
