"""The HTTP fast path's streamed response body: chunked transfer written straight to the transport.

uvicorn sends a streamed body through the router's ``_send_response``: a disconnect watcher
task, a message dict per chunk, ``RequestResponseCycle.send`` and one ``transport.write`` per
chunk, plus one more for the response head and one for the terminating chunk. For an AI stream
that is three writes (three syscalls and TCP segments) for a short answer, and the machinery
around them costs more than the writes. ``ChunkedBody`` is one task that reads the worker's body
(a ``ResponseStream``) and writes the bytes uvicorn would write, in the same order:

- writes issued while the task runs without waiting are joined into one ``transport.write``
  (flushed when the task next waits on the body, or at the end): the head and a first chunk
  that was already there, or the last chunk and the terminator, go out together. Nothing waits
  for data that is not there: a chunk the task has is on the wire before it waits for the next;
- flow control as uvicorn's ``send``: when the transport asks to pause, the task waits for it
  to drain before writing more (and so stops reading the worker's body);
- a client that disconnects cancels the task at once (``cancel``), which closes the body: the
  request is cancelled in its isolate and a model stops generating, as the router's watcher does
  within ``WATCH_AFTER_S``. A task cancelled before its first step would never run its
  ``finally`` (nothing would close the body), so until it starts ``cancel`` leaves it to see
  ``disconnected`` first thing;
- a body that fails (``ResponseAborted``: a limit, the worker or its binding failing) is logged
  as uvicorn logs an application's error after the response started (the dev server's filter
  drops those), and the connection is closed, so the client cannot mistake it for complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

TERMINATOR = b"0\r\n\r\n"
# Joined writes stop at this size: a body whose chunks are all there at once (a large inline
# answer in chunks, a cached replay) goes out as it is read, under the transport's flow control.
FLUSH_BYTES = 64 * 1024


class ChunkedBody:
    """One streamed response body being written to a connection."""

    __slots__ = (
        "_protocol",
        "_request",
        "_body",
        "_on_complete",
        "_parts",
        "_pending",
        "_flush_handle",
        "_running",
        "task",
    )

    def __init__(
        self,
        protocol: Any,
        request: Any,
        body: AsyncIterator[bytes],
        on_complete: Callable[[], None],
    ) -> None:
        # protocol: the FastHttpProtocol (transport, flow, loop, logger); request: its
        # FastRequest (disconnected); on_complete runs right after the terminator was written,
        # before the body is closed (as uvicorn's send, then the router's aclose).
        self._protocol = protocol
        self._request = request
        self._body: Any = body
        self._on_complete = on_complete
        self._parts: list[bytes] = []
        self._pending = 0  # bytes in _parts
        self._flush_handle: asyncio.Handle | None = None
        self._running = False  # the task took its first step (its finally will run)
        self.task: asyncio.Task[None] | None = None

    def start(self, head: bytes) -> asyncio.Task[None]:
        """Queue ``head`` and start the task that writes the body after it."""
        self._parts.append(head)
        self.task = self._protocol.loop.create_task(self._run())
        return self.task

    def cancel(self) -> None:
        """The client left: stop now (the body is closed on the way out)."""
        if self._running and self.task is not None and not self.task.done():
            self.task.cancel()

    def _write(self, data: bytes) -> None:
        self._parts.append(data)
        self._pending += len(data)
        if self._pending >= FLUSH_BYTES:
            self._flush_now()  # (the transport may ask to pause now: the next chunk waits)
        elif self._flush_handle is None:
            # Runs once this task waits: what it wrote until then goes out in one write.
            self._flush_handle = self._protocol.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        self._pending = 0
        if self._parts:
            data = b"".join(self._parts) if len(self._parts) > 1 else self._parts[0]
            self._parts.clear()
            if not self._protocol.transport.is_closing():
                self._protocol.transport.write(data)

    def _flush_now(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self._flush()

    async def _run(self) -> None:
        protocol = self._protocol
        fast = self._request
        flow = protocol.flow
        body = self._body
        self._running = True
        if fast.disconnected:  # gone before this first step: write nothing, close the body
            self._parts.clear()
        elif self._parts and self._flush_handle is None:  # the head, unless a chunk joins it
            self._flush_handle = protocol.loop.call_soon(self._flush)
        try:
            if fast.disconnected:
                return
            async for chunk in body:
                if fast.disconnected:
                    break
                if flow.write_paused:
                    self._flush_now()
                    await flow.drain()
                    if fast.disconnected:
                        break
                if chunk:
                    self._write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            else:
                if flow.write_paused and not fast.disconnected:
                    self._flush_now()
                    await flow.drain()
                if not fast.disconnected:
                    self._parts.append(TERMINATOR)
                    self._flush_now()
                    self._on_complete()
        except asyncio.CancelledError:
            task = self.task
            if not (fast.disconnected and task is not None and task.uncancel() == 0):
                raise
        except Exception as exc:  # as uvicorn after the response started: log, cut the connection
            self._flush_now()
            protocol.logger.error("Exception in ASGI application\n", exc_info=exc)
            protocol.transport.close()
        finally:
            if self._flush_handle is not None:
                self._flush_now()
            fast.writer = None  # no cycle left for the GC (it refers to this writer)
            await body.aclose()
