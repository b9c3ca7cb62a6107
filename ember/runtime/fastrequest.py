"""One fast-path request in flight, standing in for uvicorn's ``RequestResponseCycle``.

``fasthttp.py`` creates it from the parser's callbacks; it carries what a late fallback to
uvicorn's cycle needs and turns the response head (or the client leaving) into the protocol's
next step.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ember.runtime.faststream import ChunkedBody
from ember.runtime.http import HttpResponse
from ember.runtime.inflight import InFlight

if TYPE_CHECKING:
    from ember.runtime.fasthttp import FastHttpProtocol


class FastRequest:
    """A fast request in flight; stands in for uvicorn's cycle in ``FastHttpProtocol.cycle``.

    uvicorn reads ``response_complete`` (pipelining), sets ``keep_alive`` (graceful shutdown)
    and, on ``connection_lost``, ``disconnected`` and ``message_event.set()``.
    """

    __slots__ = (
        "protocol",
        "pending",
        "keep_alive",
        "response_complete",
        "disconnected",
        "method",
        "url",
        "headers",
        "writer",
    )

    def __init__(
        self, protocol: FastHttpProtocol, pending: InFlight, keep_alive: bool, method: str
    ) -> None:
        self.protocol = protocol
        self.pending = pending
        self.keep_alive = keep_alive
        self.response_complete = False
        self.disconnected = False
        # Kept for the rare response that leaves the fast path after the head arrived.
        self.method = method
        self.url = protocol.url
        self.headers = protocol.headers
        self.writer: ChunkedBody | None = None  # once a streamed body is being written

    @property
    def message_event(self) -> FastRequest:
        return self

    def set(self) -> None:
        """``connection_lost``: the client left; cancel the request in its isolate now."""
        if not self.disconnected:
            return
        if self.writer is not None:
            self.writer.cancel()  # closing its body cancels the request
        elif not self.pending.head.done():
            self.pending.client_gone()
        # Else the head is ready but ``on_head`` has not run yet (both were scheduled in the
        # same turn of the loop): it sees ``disconnected`` and cancels the request there.

    def on_head(self, head: asyncio.Future[HttpResponse]) -> None:
        if head.cancelled():
            return
        if self.disconnected:
            self._dropped(head.result())
            return
        try:
            self.protocol.fast_response(self, head.result())
        except Exception as exc:  # as uvicorn does with an application's error once started
            self.protocol.logger.error("Exception in the HTTP fast path", exc_info=exc)
            self.protocol.transport.close()

    def _dropped(self, response: HttpResponse) -> None:
        """The client left with the response ready and nothing of it written.

        As the router's wait for the head when the client leaves: cancel the request, and close
        a streamed body, which nothing else would read or close (a binding's stream handed back
        would go on, and the request stay in flight, until the wall-time limit).
        """
        self.pending.client_gone()
        body = response.body
        if not isinstance(body, bytes):
            protocol = self.protocol
            task = protocol.loop.create_task(body.aclose())
            task.add_done_callback(protocol.tasks.discard)  # uvicorn's shutdown waits for it
            protocol.tasks.add(task)
