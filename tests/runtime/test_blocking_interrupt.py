"""The CPU-limit interrupt (SIGXCPU) landing inside a blocking call's pump: frames taken off the
writer's queue are written whole, frames read off the socket are dispatched whole, and the
interrupt still reaches the caller right after. The signal is raised exactly at the worst
moment (inside ``take_outgoing`` / ``data_received``), on a real socketpair."""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from ember.runtime.isolate.blocking import BlockingCalls
from ember.runtime.isolate.scope import CpuLimitInterrupt

FRAMES = b"other request's frames " * 20_000  # several writes' worth: a cut would show


class Link:
    """A connection whose queue take and dispatch are where the limit fires."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.channel: Any = None
        self.mux: Any = None
        self.queued = FRAMES
        self.dispatched: list[bytes] = []

    def fileno(self) -> int:
        return self.sock.fileno()

    def take_outgoing(self) -> bytes:
        data, self.queued = self.queued, b""
        if data:
            signal.raise_signal(signal.SIGXCPU)  # the limit fires with the frames in hand
        return data

    def data_received(self, data: bytes) -> None:
        self.dispatched.append(b"first half")
        signal.raise_signal(signal.SIGXCPU)
        self.dispatched.append(data)


class Stream:
    """A reply stream with one chunk ready after ``empty`` polls."""

    def __init__(self, empty: int) -> None:
        self.empty = empty

    def read_nowait(self) -> bytes | None:
        if self.empty:
            self.empty -= 1
            return None
        return b"chunk"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    previous = signal.signal(signal.SIGXCPU, _interrupt)
    yield ours, theirs
    signal.signal(signal.SIGXCPU, previous)
    ours.close()
    theirs.close()


def _interrupt(signum: int, frame: Any) -> None:
    raise CpuLimitInterrupt()


def _read_all(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(10)  # only against a hang
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_frames_taken_when_the_limit_fires_are_written_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    link = Link(ours)
    received: list[bytes] = []

    async def blocked() -> None:
        calls = BlockingCalls(link)
        reader = asyncio.get_running_loop().run_in_executor(
            None, lambda: received.append(_read_all(theirs, len(FRAMES)))
        )
        with pytest.raises(CpuLimitInterrupt):
            calls.read(Stream(0), timeout=5)  # type: ignore[arg-type]
        await reader

    asyncio.run(blocked())
    assert received == [FRAMES]


def test_bytes_read_when_the_limit_fires_are_dispatched_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    link = Link(ours)
    link.queued = b""
    theirs.sendall(b"a reply frame")

    async def blocked() -> None:
        calls = BlockingCalls(link)
        with pytest.raises(CpuLimitInterrupt):
            calls.read(Stream(5), timeout=5)  # type: ignore[arg-type]

    asyncio.run(blocked())
    assert link.dispatched == [b"first half", b"a reply frame"]
