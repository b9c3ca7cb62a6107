"""The isolate's ``BindingChannel``: binding calls and subrequests as frames on its socket.

A call is tagged with the running request (``scope.CURRENT``); outside a request it fails with
the platform's global-scope message. If the awaiting task is cancelled (the handler gave up, or
the supervisor cancelled the request), a CancelCall frame tells the supervisor to cancel the
service's work. A streamed reply is an ``InStream``; closing it early cancels the call too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Callable
from typing import TYPE_CHECKING, Any

from ember.bindings.base import CallReply, ServiceError
from ember.errors import BindingError, LimitExceeded
from ember.js_errors import JsTypeError
from ember.runtime.isolate.scope import CpuLimitInterrupt, current_scope
from ember.runtime.mux import Mux, OutStream, StreamAborted
from ember.runtime.protocol import Call, CallError, CallResult, CancelCall, Message

if TYPE_CHECKING:
    from ember.runtime.isolate.blocking import BlockingCalls


class IsolateChannel:
    """Outstanding calls of this isolate, keyed by call id."""

    def __init__(self, send: Callable[[Message], None], mux: Mux) -> None:
        self._send = send
        self._mux = mux
        self._next_cid = 0
        self._pending: dict[int, asyncio.Future[CallReply]] = {}
        # The same calls for code that cannot await (sync HTTP clients); set by the connection.
        self.blocking: BlockingCalls | None = None

    async def call(
        self,
        binding: str,
        method: str,
        args: list[object],
        *,
        upload: bytes | AsyncIterable[bytes] | None = None,
    ) -> CallReply:
        """Send a call and wait for its reply (see ``ember.bindings.base.BindingChannel``)."""
        out: OutStream | None = self._mux.open_out() if upload is not None else None
        cid, future = self.begin(binding, method, args, out.sid if out else 0)
        uploader = asyncio.ensure_future(_upload(out, upload)) if out is not None else None
        try:
            return await future
        except asyncio.CancelledError:
            self.abandon(cid)
            raise
        finally:
            self._pending.pop(cid, None)
            if uploader is not None and not uploader.done():
                uploader.cancel()
            if out is not None:
                self._mux.release_out(out)

    def begin(
        self, binding: str, method: str, args: list[object], upload_sid: int = 0
    ) -> tuple[int, asyncio.Future[CallReply]]:
        """Send a call for the running request; its reply resolves the returned future."""
        scope = current_scope()
        if scope.cpu_exceeded:  # code that caught the CPU interrupt calls on: it ends here
            raise CpuLimitInterrupt()
        self._next_cid += 1
        cid = self._next_cid
        future: asyncio.Future[CallReply] = asyncio.get_running_loop().create_future()
        self._pending[cid] = future
        self._send(Call(cid, scope.rid, binding, method, args, upload_sid))
        return cid, future

    def abandon(self, cid: int) -> None:
        """The caller gave up on call ``cid``: if it is still pending, cancel the service's work."""
        if self._pending.pop(cid, None) is not None:
            self._send(CancelCall(cid))

    def on_result(self, message: CallResult) -> None:
        """A CallResult arrived: resolve the waiting call (a stream is registered first)."""
        future = self._pending.pop(message.cid, None)
        stream = None
        if message.sid:
            cid = message.cid
            # Lazy: nothing flows until the handler reads it, so that a reply returned unread as
            # the response can be handed back to the supervisor instead (events.py).
            stream = self._mux.expect_in(
                message.sid, on_abandon=lambda: self._send(CancelCall(cid)), lazy=True
            )
        if future is None or future.done():
            if stream is not None:
                self._mux.release_in(stream)
                self._send(CancelCall(message.cid))
            return
        future.set_result(CallReply(message.value, stream))

    def on_error(self, message: CallError) -> None:
        """A CallError arrived: raise it in the waiting call."""
        future = self._pending.pop(message.cid, None)
        if future is not None and not future.done():
            future.set_exception(_exception(message))

    def close(self, reason: str) -> None:
        """The connection is gone: fail every pending call."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError(reason))
        self._pending.clear()


async def _upload(out: OutStream | None, upload: bytes | AsyncIterable[bytes] | None) -> None:
    assert out is not None and upload is not None  # invariant: only called with an upload
    try:
        if isinstance(upload, bytes):
            await out.send(upload)
        else:
            async for chunk in upload:
                await out.send(chunk)
        out.end()
    except StreamAborted:
        pass
    except asyncio.CancelledError:
        out.abort("upload cancelled")
        raise
    except Exception as exc:  # the user's stream failed: the service sees an aborted upload
        out.abort(f"{type(exc).__name__}: {exc}")


def _exception(message: CallError) -> Exception:
    if message.kind == "limit":
        return LimitExceeded(str(message.data.get("limit", "limit")), None, None, message.message)
    if message.kind == "type":  # a TypeError that ``except JsException`` catches too
        return JsTypeError(message.message)
    if message.kind == "binding":
        return BindingError(message.message)
    data: dict[str, Any] = message.data
    return ServiceError(message.message, kind=message.kind, data=data)
