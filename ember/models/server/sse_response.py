"""A streamed response that stops when its client goes away, without a task group per request.

starlette's ``StreamingResponse`` on a server of ASGI spec < 2.4 (uvicorn declares 2.3) runs
every response as an anyio task group of two tasks, the stream and a listener for
``http.disconnect``, with their cancel scopes. On the model server's event loop, which takes in
a burst's requests one after the other while the engine thread waits for them, that cost 0.14
of the 0.82 ms of a one-token streamed request and 0.68 of the 3.9 ms of a 32-token one
(``bench/server_intake.py``, medians of alternating rounds, lower in 7 of 8 and 5 of 6). Here the
response streams in the task that serves the request, and one plain task watches ``receive``:
on ``http.disconnect`` it cancels the stream, which closes the body iterator at once (the
routes' ``finally`` then aborts the request in the engine), and the response returns as if it
had ended. starlette's class stays the reference (``tests/models/server/test_sse_response.py``
compares the messages both send on random bodies, and what both do when the client leaves).
"""

from __future__ import annotations

import asyncio

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class SSEResponse(StreamingResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.current_task()
        assert streaming is not None
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            streaming.cancel()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            head = {"status": self.status_code, "headers": self.raw_headers}
            await send({"type": "http.response.start", **head})
            async for chunk in self.body_iterator:
                if not isinstance(chunk, bytes | memoryview):
                    chunk = chunk.encode(self.charset)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not gone:
                raise
            streaming.uncancel()  # our own cancel: the client left, nothing failed
        finally:
            # Synchronously, with no await before it: the watcher cannot run (and cancel the
            # server's task, which this one goes back to) after the stream has ended.
            watcher.cancel()
            if gone:  # cancelled in a send: the body waits at a yield, close it now
                close = getattr(self.body_iterator, "aclose", None)
                if close is not None:
                    await close()
        if self.background is not None and not gone:
            await self.background()
