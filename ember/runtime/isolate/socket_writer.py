"""The isolate's writes to its socket, with the bytes that did not fit held where sync code can
reach them.

The event loop's transport would keep such bytes in its own buffer, which only the running loop
can send. Sync code that blocks the loop (``requests`` in a handler: ``blocking.py``) must write
its own frames after them, so it could not proceed while that buffer held anything. Here every
write goes straight to the socket (one ``write`` call, as the transport makes); the rest waits
in ``pending`` and goes out when the socket has room (a watcher on a duplicate of the socket's
descriptor: the loop refuses a watcher on a descriptor its transport owns), or at once when a
blocking call takes it with ``take_pending`` to write before its own frames.
"""

from __future__ import annotations

import asyncio
import os


class SocketWriter:
    """What ``FrameWriter`` writes through in the isolate (``write``, ``is_closing``,
    ``get_write_buffer_size``: the transport methods it uses)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._fd: int = transport.get_extra_info("socket").fileno()
        # A dup of _fd for the watcher, made now: made when first needed, a full descriptor
        # table (a handler leaking files) would leave bytes pending with nothing to send them.
        self._watch_fd = os.dup(self._fd)
        self._watching = False
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        if self._pending:  # behind bytes not yet sent: keep the order
            self._pending += data
            self._watch()  # (a no-op while the watcher is registered)
            return
        sent = self._send(data)
        if sent < len(data):
            self._pending += memoryview(data)[sent:]
            self._watch()

    def take_pending(self) -> bytes:
        """The bytes not yet sent, removed: the caller writes them before anything else."""
        data = bytes(self._pending)
        self._pending.clear()
        return data

    def get_write_buffer_size(self) -> int:
        return len(self._pending)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def _send(self, data: bytes | bytearray) -> int:
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0
        except OSError:
            # The supervisor is gone: the transport's connection_lost ends this process.
            return len(data)

    def _watch(self) -> None:
        if not self._watching:
            self._loop.add_writer(self._watch_fd, self._on_writable)
            self._watching = True

    def _on_writable(self) -> None:
        if self._pending:
            del self._pending[: self._send(self._pending)]
        if not self._pending:
            self._loop.remove_writer(self._watch_fd)
            self._watching = False
