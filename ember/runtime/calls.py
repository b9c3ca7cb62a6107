"""Binding calls from one isolate, run by the supervisor (one task per call).

Every Call frame is checked: ids must increase, the request must be in flight (else the
platform's global-scope error), the deployment's calls must not be refused (``refusal``: a
temporary account past its expiry on ``ember serve``), the binding must be one of the
deployment's, and the number of concurrent calls is bounded. A service's answer goes back as
CallResult (a streamed answer as a credit-controlled stream), its refusal as CallError.
Cancellation: CancelCall from the isolate, the end of the request, or the death of the isolate
cancels the call's task, which cancels the service's coroutine or closes its stream generator
(a model stops generating).

A streamed answer is a lazy stream: nothing is pulled from the service until the isolate reads
it, or hands it back unread as its response (``pipe``): then the call's task only waits while
the router sends the chunks to the client (``pipe.py``), and ends the isolate's stream after.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from ember.bindings.base import BindingService, ServiceError, StreamReply
from ember.errors import BindingError, LimitExceeded, ProtocolError
from ember.runtime.isolate.scope import GLOBAL_SCOPE_MESSAGE
from ember.runtime.mux import InStream, Mux, StreamAborted
from ember.runtime.pipe import PipedBody
from ember.runtime.protocol import Call, CallError, CallResult, Message, encode
from ember.runtime.worker_loops import MAX_NESTED

log = logging.getLogger(__name__)
# (request id, level, message): a service's note about a call (CallContextImpl.note).
Note = Callable[[int, str, str], None]


class CallContextImpl:
    """The ``CallContext`` a service sees."""

    __slots__ = (
        "deployment_id",
        "request_id",
        "upload",
        "loops_left",
        "root_path",
        "_counters",
        "_note",
    )

    def __init__(
        self,
        deployment_id: str,
        request_id: int,
        upload: InStream | None,
        counters: dict[str, int],
        note: Note | None = None,
        loops_left: int = MAX_NESTED,
        root_path: str = "",
    ) -> None:
        self.deployment_id = deployment_id
        self.request_id = request_id
        self.upload: AsyncIterator[bytes] | None = upload
        self.loops_left = loops_left  # what its request's subrequests carry (worker_loops.py)
        self.root_path = root_path  # the path prefix its request came by
        self._counters = counters
        self._note = note

    def note(self, level: str, message: str) -> None:
        """A line for the request's invocation log and the operator (``SupervisorHooks.note``)."""
        if self._note is not None:
            self._note(self.request_id, level, message)

    def count(self, counter: str) -> int:
        """Increment a per-request counter and return the new value."""
        value = self._counters.get(counter, 0) + 1
        self._counters[counter] = value
        return value


class CallRunner:
    """The calls of one isolate."""

    def __init__(
        self,
        deployment_id: str,
        send: Callable[[Message], None],
        mux: Mux,
        lookup: Callable[[str], BindingService | None],
        max_concurrent: int,
        note: Note | None = None,
        refusal: Callable[[], str | None] | None = None,
    ) -> None:
        self._deployment_id = deployment_id
        self._note = note
        self._refusal = refusal
        self._send = send
        self._mux = mux
        self._lookup = lookup
        self._max = max_concurrent
        self._last_cid = 0
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._by_request: dict[int, set[int]] = {}
        # open reply stream sid -> (its request id, the service's chunks)
        # sid -> (request, chunks, their announced length)
        self._reply_streams: dict[int, tuple[int, AsyncIterator[bytes], int | None]] = {}
        self.piped = 0  # reply streams handed back unread and sent by the supervisor

    @property
    def active(self) -> int:
        """Calls still running (tests check cancellation with this)."""
        return len(self._tasks)

    def on_call(
        self,
        message: Call,
        counters: dict[str, int] | None,
        loops_left: int = MAX_NESTED,
        root_path: str = "",
    ) -> None:
        """Start a call; ``counters`` is its request's counter table, None if not in flight;
        ``loops_left`` what its subrequests carry in ``cf-ew-via``; ``root_path`` the path
        prefix its request came by."""
        if message.cid <= self._last_cid:
            raise ProtocolError(f"call id {message.cid} reused or out of order")
        self._last_cid = message.cid
        upload = self._mux.expect_in(message.sid) if message.sid else None
        if counters is None:
            self._refuse(message.cid, upload, "binding", GLOBAL_SCOPE_MESSAGE)
            return
        if len(self._tasks) >= self._max:
            self._refuse(message.cid, upload, "limit", f"more than {self._max} concurrent calls")
            return
        refused = self._refusal() if self._refusal is not None else None
        if refused is not None:
            self._refuse(message.cid, upload, "binding", refused)
            return
        try:
            service = self._lookup(message.binding)
        except Exception:  # never let a lookup end the isolate (we are in data_received)
            log.exception("looking up binding %s failed", message.binding)
            self._refuse(
                message.cid, upload, "internal", f"internal error in binding {message.binding}"
            )
            return
        if service is None:
            self._refuse(
                message.cid, upload, "binding", f"env has no binding named {message.binding!r}"
            )
            return
        context = CallContextImpl(
            self._deployment_id, message.rid, upload, counters, self._note, loops_left, root_path
        )
        task = asyncio.ensure_future(self._run(message, service, context, upload))
        self._tasks[message.cid] = task
        self._by_request.setdefault(message.rid, set()).add(message.cid)
        task.add_done_callback(lambda _t, cid=message.cid, rid=message.rid: self._forget(cid, rid))

    def pipe(self, rid: int, sid: int) -> PipedBody | None:
        """Request ``rid`` hands reply stream ``sid`` back unread: the body to send, or None.

        None when the stream is over or was read meanwhile (a race the isolate cannot see);
        ProtocolError for a stream that never existed or belongs to another request.
        """
        entry = self._reply_streams.get(sid)
        if entry is None:
            if not 0 < sid <= self._mux.last_out_sid:
                raise ProtocolError(f"response names stream {sid}, which was never opened")
            return None
        owner, chunks, length = entry
        if owner != rid:
            raise ProtocolError(f"request {rid} claims the reply stream of request {owner}")
        out = self._mux.out_stream(sid)
        body = PipedBody(sid, chunks, length)
        if out is None or not out.claim(body):
            return None
        return body

    def cancel(self, cid: int) -> None:
        """CancelCall: the isolate stopped waiting."""
        task = self._tasks.get(cid)
        if task is not None:
            task.cancel()

    def cancel_request(self, rid: int) -> None:
        """The request ended or its client went away: cancel its outstanding calls."""
        if rid in self._by_request:  # most requests made no call
            for cid in list(self._by_request[rid]):
                self.cancel(cid)

    def close(self) -> None:
        """The isolate is gone: cancel everything."""
        for task in list(self._tasks.values()):
            task.cancel()

    def _forget(self, cid: int, rid: int) -> None:
        self._tasks.pop(cid, None)
        cids = self._by_request.get(rid)
        if cids is not None:
            cids.discard(cid)
            if not cids:
                del self._by_request[rid]

    def _refuse(self, cid: int, upload: InStream | None, kind: str, message: str) -> None:
        if upload is not None:
            self._mux.release_in(upload)
        self._send(CallError(cid, kind, message, {}))

    async def _run(
        self,
        message: Call,
        service: BindingService,
        context: CallContextImpl,
        upload: InStream | None,
    ) -> None:
        cid = message.cid
        try:
            result = await service.call(message.method, message.args, context)
        except asyncio.CancelledError:
            raise
        except ServiceError as exc:
            self._send(CallError(cid, exc.kind, str(exc), exc.data))
            return
        except LimitExceeded as exc:
            self._send(CallError(cid, "limit", str(exc), {"limit": exc.limit}))
            return
        except BindingError as exc:
            self._send(CallError(cid, "binding", str(exc), {}))
            return
        except Exception:
            log.exception("binding %s.%s failed", message.binding, message.method)
            self._send(
                CallError(cid, "internal", f"internal error in binding {message.binding}", {})
            )
            return
        finally:
            if upload is not None:
                self._mux.release_in(upload)
        if isinstance(result, StreamReply):
            await self._stream(cid, message.rid, result)
            return
        try:
            encode(CallResult(cid, result, 0))  # refuse unencodable values before sending
        except (TypeError, ValueError, OverflowError):
            log.error(
                "binding %s.%s returned an unencodable value", message.binding, message.method
            )
            self._send(
                CallError(cid, "internal", f"internal error in binding {message.binding}", {})
            )
            return
        self._send(CallResult(cid, result, 0))

    async def _stream(self, cid: int, rid: int, reply: StreamReply) -> None:
        out = self._mux.open_out(lazy=True)
        assert out.started is not None  # invariant: a lazy stream has a start
        chunks: Any = reply.chunks
        piped: PipedBody | None = None
        self._reply_streams[out.sid] = (rid, chunks, reply.length)
        try:
            self._send(CallResult(cid, reply.head, out.sid))
            claim = await out.started
            if isinstance(claim, PipedBody):
                piped = claim
                self.piped += 1
                reason = await asyncio.shield(piped.finished)
                if reason is None:
                    out.end()
                else:
                    out.abort(reason)
                return
            async for chunk in chunks:
                await out.send(bytes(chunk))
            out.end()
        except StreamAborted:
            pass
        except asyncio.CancelledError:
            out.abort("cancelled")
            if piped is not None:
                piped.fail("cancelled")
            raise
        except Exception as exc:
            log.exception("binding stream failed")
            out.abort(f"{type(exc).__name__}: {exc}")
        finally:
            self._reply_streams.pop(out.sid, None)
            self._mux.release_out(out)
            if piped is not None:
                await piped.aclose()
            else:
                closer = getattr(chunks, "aclose", None)
                if closer is not None:
                    await closer()
