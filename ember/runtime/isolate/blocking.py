"""Binding calls from code that cannot await: sync HTTP clients (``requests``, ``httpx.Client``).

Such code runs on the isolate's event-loop thread, inside a handler's task, so the loop cannot
run until it returns. ``BlockingCalls`` then pumps the isolate's socket itself: the frames queued
so far are written directly, and every frame that arrives goes through the connection's usual
dispatch (``IsolateConnection.data_received``). Replies, stream data, new requests and
cancellations meant for the isolate's other requests are therefore registered exactly as if the
loop had read them (nothing is lost or reordered); only the loop's callbacks (other tasks' steps)
wait until the blocking call returns. The platform behaves the same way: a sync HTTP call holds
its isolate's thread until the answer arrives.

Every wait has a deadline (the client library's timeout, else ``DEFAULT_TIMEOUT_S``), and a
Cancel of the request (client gone, wall limit) ends it at once with ``CancelledError``.
SIGXCPU is held while frames are written or dispatched, so the CPU-limit interrupt (raised into
the running request's code, which this is) can never cut a frame in half; it fires right after.

Bytes the socket had no room for earlier (the supervisor was slow to read) are not in the
loop's transport but in ``socket_writer.SocketWriter``: the pump takes and writes them first,
so a blocking call waits for room like any other write instead of failing.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from ember.bindings.base import CallReply
from ember.runtime.fields import MAX_CHUNK_BYTES
from ember.runtime.isolate.channel import IsolateChannel
from ember.runtime.mux import InStream, Mux, OutStream

DEFAULT_TIMEOUT_S = 120.0  # a wait with no timeout of its own; the request's wall limit is first
_READ_BYTES = 256 * 1024
WRITE_WAIT_S = 1.0  # a poll for room to write, repeated until the frame is out


class Link(Protocol):
    """What ``BlockingCalls`` needs of the isolate's connection (``main.IsolateConnection``)."""

    channel: IsolateChannel
    mux: Mux

    def fileno(self) -> int: ...  # the socket the loop's transport reads and writes

    def take_outgoing(self) -> bytes: ...  # every byte not yet written, in order (now removed)

    def data_received(self, data: bytes) -> None: ...  # the usual dispatch of arriving bytes


class BlockingCalls:
    """Blocking binding calls on the isolate's one socket (see the module docstring)."""

    def __init__(self, link: Link) -> None:
        self._link = link
        self._loop_thread = threading.get_ident()

    def call(
        self,
        binding: str,
        method: str,
        args: list[object],
        *,
        upload: bytes | None = None,
        timeout: float | None = None,
    ) -> CallReply:
        """``IsolateChannel.call`` for sync code: send, then pump the socket until the reply."""
        task = self._enter()
        out = self._link.mux.open_out() if upload is not None else None
        cid, future = self._link.channel.begin(binding, method, args, out.sid if out else 0)
        deadline = _deadline(timeout)
        try:
            if out is not None and upload is not None:
                self._upload(out, upload, future.done, deadline, task)
            while not future.done():
                self._pump(deadline, task)
        except BaseException:
            self._link.channel.abandon(cid)
            if out is not None:
                out.abort("the caller gave up")
            self._write_queued()  # the CancelCall goes out now, not when the loop next runs
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: the caller raises its own error instead
            raise
        finally:
            if out is not None:
                self._link.mux.release_out(out)
        return future.result()

    def read(self, stream: InStream, timeout: float | None = None) -> bytes:
        """The next chunk of a reply stream (``b""`` at its end), pumping the socket meanwhile."""
        task = self._enter()
        deadline = _deadline(timeout)
        while True:
            chunk = stream.read_nowait()
            if chunk is not None:
                self._write_queued()  # credit for what was read goes out at once
                return chunk
            self._pump(deadline, task)

    # -- the pump ---------------------------------------------------------------------------

    def _enter(self) -> asyncio.Task[object] | None:
        if threading.get_ident() != self._loop_thread:
            raise RuntimeError(
                "sync HTTP clients work in the handler's own thread only; in another thread, "
                "use fetch() or httpx.AsyncClient from the handler instead"
            )
        return asyncio.current_task()

    def _upload(
        self,
        out: OutStream,
        body: bytes,
        answered: Callable[[], bool],
        deadline: float,
        task: asyncio.Task[object] | None,
    ) -> None:
        view = memoryview(body)
        for start in range(0, len(view), MAX_CHUNK_BYTES):
            chunk = bytes(view[start : start + MAX_CHUNK_BYTES])
            while not out.send_nowait(chunk):
                if answered():  # the service answered (or failed) before reading all of it
                    out.abort("the service answered before the upload ended")
                    return
                self._pump(deadline, task)
        out.end()

    def _pump(self, deadline: float, task: asyncio.Task[object] | None) -> None:
        """Write what is queued, then wait (until ``deadline``) for bytes and dispatch them."""
        self._write_queued()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer before the deadline")
        poller = select.poll()
        poller.register(self._link.fileno(), select.POLLIN)
        if not poller.poll(remaining * 1000):
            return
        try:
            data = os.read(self._link.fileno(), _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            os._exit(0)  # the supervisor closed our socket: as IsolateConnection.connection_lost
        with _cpu_interrupt_held():
            self._link.data_received(data)

    def flush(self) -> None:
        """Write every queued frame now, waiting for room: for output produced faster than the
        loop gets to send it (a handler printing in a loop that never awaits). A no-op off the
        loop's thread, whose frames the loop owns."""
        if threading.get_ident() == self._loop_thread:
            self._write_queued()

    def _write_queued(self) -> None:
        # Taken and written with the CPU-limit interrupt held: frames taken off the writer's
        # queue and then dropped by an interrupt would be other requests' heads and data.
        with _cpu_interrupt_held():
            data = self._link.take_outgoing()
            if not data:
                return
            fd = self._link.fileno()
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    # A frame half written cannot be abandoned: wait for the supervisor to
                    # read (it never stops reading an isolate; its limits kill a stuck one).
                    poller = select.poll()
                    poller.register(fd, select.POLLOUT)
                    poller.poll(WRITE_WAIT_S * 1000)
                except OSError:
                    os._exit(0)  # the supervisor is gone


def _deadline(timeout: float | None) -> float:
    return time.monotonic() + (DEFAULT_TIMEOUT_S if timeout is None else max(timeout, 0.0))


@contextmanager
def _cpu_interrupt_held() -> Iterator[None]:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGXCPU})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
