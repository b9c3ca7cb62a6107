"""A binding's reply stream sent to the HTTP client by the supervisor, never entering the isolate.

When a handler returns a binding's reply stream unread as its response body (``return
Response(await env.AI.run(model, {..., "stream": True}))``), the isolate hands the stream back
(``PipeResponse``) and the router reads the service's chunks itself: no chunk is framed,
written to the isolate, parsed there, framed again and written back. Workers' runtime does the
same for a ReadableStream piped straight through.

The router's task reads the source directly (no task or future per chunk). Everything that
ends a request still ends the body: ``fail`` (a limit, the isolate dying, the call cancelled)
interrupts a read in progress by cancelling the reader's task, which closes the service's
stream (a model stops generating) and makes the read raise ``StreamAborted``, exactly as an
aborted isolate stream does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ember.runtime.mux import StreamAborted


class PipedBody:
    """The unread reply of one binding call, as the response body of its request."""

    def __init__(self, sid: int, chunks: AsyncIterator[bytes], length: int | None = None) -> None:
        self.sid = sid
        self.length = length  # the byte count the service announced, if any
        self._chunks: Any = chunks
        self._reader: asyncio.Task[Any] | None = None  # the task inside a read, if any
        self._interrupted = False
        self._error: str | None = None
        self._source_closed = False
        self._loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[str | None] = self._loop.create_future()
        self.sent = 0

    @property
    def ended(self) -> bool:
        """True once the source ended, failed, or the body was closed."""
        return self.finished.done()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self.finished.done():
            if self._error is not None:
                raise StreamAborted(self._error)
            raise StopAsyncIteration
        task = asyncio.current_task(self._loop)  # with the loop: no getpid syscall to find it
        self._reader = task
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._end(None)
            raise
        except asyncio.CancelledError:
            self._end(self._error or "cancelled")
            if self._interrupted and task is not None and task.uncancel() == 0:
                raise StreamAborted(self._error or "aborted") from None
            raise
        except Exception as exc:  # the service's stream failed: the body is cut
            self._end(f"{type(exc).__name__}: {exc}")
            raise StreamAborted(self._error or "failed") from None
        finally:
            self._reader = None
        self.sent += len(chunk)
        return bytes(chunk)

    def fail(self, reason: str) -> None:
        """End the body abnormally: a read in progress raises ``StreamAborted`` now."""
        if self.finished.done() or self._interrupted:
            return
        self._error = reason
        reader = self._reader
        if reader is not None and not reader.done():
            # The service's stream is being awaited in the router's task: cancelling that await
            # is the only way to stop it now, and it closes the stream on the way out.
            self._interrupted = True
            reader.cancel()
            return
        self._end(reason)

    async def aclose(self) -> None:
        """Stop: the service's stream is closed (its generator's ``finally`` runs)."""
        if self._reader is not None:
            self.fail("closed")  # being read: the cancelled read closes it
            return
        self._end(self._error or "closed")
        if not self._source_closed:
            self._source_closed = True
            closer = getattr(self._chunks, "aclose", None)
            if closer is not None:
                await closer()

    def _end(self, error: str | None) -> None:
        if not self.finished.done():
            self._error = error
            self.finished.set_result(error)


def ended_body(sid: int, reason: str) -> PipedBody:
    """A body that is already cut (its stream ended before it could be handed over)."""
    body = PipedBody(sid, _nothing())
    body.fail(reason)
    return body


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator
