"""Two real ``ember dev`` servers on one event loop (the fast HTTP path and uvicorn's, the
reference) and raw-socket exchanges with them, for the tests that compare their bytes on the wire
(``test_fasthttp.py``, ``test_fasthttp_streams.py``)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ember.bindings.registry import BindingRegistry
from ember.runtime import events as E
from ember.runtime.connguard import ConnectionLimits
from ember.runtime.devserver import DevOptions, DevServer

T = TypeVar("T")


class DualServers:
    """Both ``ember dev`` servers on one event loop, which runs (in this, the main thread) only
    while a test's client runs in a worker thread: nothing of pytest's runs next to the servers
    (Python 3.11's parser is not safe for two threads at once, and tracebacks parse)."""

    def __init__(
        self,
        root: Path,
        state: Path,
        registry: BindingRegistry | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.sinks = {fast: E.ListSink() for fast in (True, False)}
        self.servers = {
            fast: DevServer(
                DevOptions(
                    project=root,
                    ip="127.0.0.1",
                    port=0,
                    persist_to=state / str(fast),
                    watch=False,
                    run_crons=False,
                    fast_http=fast,
                    registry=registry,
                    limits=limits,
                ),
                self.sinks[fast],
            )
            for fast in (True, False)
        }
        self.loop = asyncio.new_event_loop()
        self.tasks = [self.loop.create_task(server.serve()) for server in self.servers.values()]
        self.loop.run_until_complete(self._started())
        self.addresses = {}
        for fast, server in self.servers.items():
            assert server.url is not None  # invariant: _started waited for it
            host, port = server.url.removeprefix("http://").rsplit(":", 1)
            self.addresses[fast] = (host, int(port))

    async def _started(self) -> None:
        while any(server.url is None for server in self.servers.values()):
            for task in self.tasks:
                if task.done():
                    task.result()
                    raise AssertionError("ember dev stopped")
            await asyncio.sleep(0.01)

    def client(self, work: Callable[[], T]) -> T:
        """Run ``work`` in a thread while the servers serve."""
        return self.loop.run_until_complete(asyncio.wait_for(asyncio.to_thread(work), 240))

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*self.tasks, return_exceptions=True))
        rest = asyncio.all_tasks(self.loop)  # what uvicorn left when it was cancelled
        for task in rest:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
        self.loop.close()


class WireReader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(1 << 16)
        self.buffer += chunk
        return bool(chunk)

    def until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            if not self._fill():
                raise EOFError(self.buffer)
        data, _, self.buffer = self.buffer.partition(marker)
        return data

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._fill():
                raise EOFError(self.buffer)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def rest(self) -> bytes:
        while self._fill():
            pass
        data, self.buffer = self.buffer, b""
        return data

    def closed(self) -> bool:
        return not self.buffer and not self._fill()


def read_response(reader: WireReader, method: str) -> tuple[bytes, bytes]:
    """(status line and headers with the date value blanked, body decoded)."""
    head = reader.until(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = [line.split(b": ", 1) for line in lines[1:]]
    shown = [lines[0]] + [b"date: -" if n == b"date" else b": ".join((n, v)) for n, v in headers]
    values = {n.lower(): v for n, v in headers}
    if method == "HEAD" or status in (204, 304):
        body = b""
    elif values.get(b"transfer-encoding") == b"chunked":
        parts = []
        while size := int(reader.until(b"\r\n"), 16):
            parts.append(reader.exactly(size))
            reader.exactly(2)
        reader.exactly(2)
        body = b"".join(parts)
    elif b"content-length" in values:
        body = reader.exactly(int(values[b"content-length"]))
    else:  # not framed (HTTP/1.0 has no chunked encoding): the body ends with the connection
        body = reader.rest()
    return b"\r\n".join(shown), body


def exchange(address: tuple[str, int], requests: list[tuple[bytes, str]], pipelined: bool) -> Any:
    with socket.create_connection(address, timeout=30) as sock:
        reader = WireReader(sock)
        answers = []
        if pipelined:
            sock.sendall(b"".join(raw for raw, _ in requests))
        for raw, method in requests:
            if not pipelined:
                sock.sendall(raw)
            answers.append(read_response(reader, method))
            if b"connection: close" in answers[-1][0]:
                break
        # A response that says so must be followed by the server closing the connection.
        return answers, b"connection: close" in answers[-1][0] and reader.closed()
