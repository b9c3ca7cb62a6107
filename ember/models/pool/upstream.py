"""One request to one replica, over the protocol every backend speaks.

``post_json`` sends a request and returns the decoded answer. ``open_events`` sends a streaming
request and returns an ``EventStream``: the ``data:`` payloads of the replica's server-sent
events, read by the consumer itself. Failure and cancellation stay prompt: when the replica
dies, the pool fails the request's lease, which cuts the connection, so a read in progress ends
with a clear error; when the consumer stops (``aclose``), the connection closes and the model
server aborts the generation (it watches its client).

A replica's refusals are mapped to Workers AI codes: its 400s carry the field it named (5006),
429 and 503 mean it is full (3040), anything else is a replica failure.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from ember.errors import ContextLengthExceeded, InvalidModelInput
from ember.models.pool import errors
from ember.models.pool.lease import Lease
from ember.models.pool.wire import StreamedResponse, WireConnectError, WireError, WirePool

CONNECT_TIMEOUT = 5.0
SNIPPET_CHARS = 100  # how much of a replica's invalid answer an error quotes
LEASE_REASON_WAIT = 0.5  # after a transport error, how long to wait for the replica's verdict
_END = object()
_CLOSED = object()  # closed by its consumer; the error a later read raises is made then


class ReplicaUnreachable(Exception):
    """The request never reached the replica (connection refused): safe to send elsewhere."""


@dataclass(frozen=True, slots=True)
class ReplicaAnswer:
    """A non-streaming answer."""

    status: int
    body: object
    headers: Mapping[str, str]


def upstream_refusal(model: str, status: int, body: object) -> Exception:
    """The error for a replica's non-200 answer (OpenAI-style error bodies are read)."""
    message = _error_message(body) or f"HTTP {status}"
    if status == 400 or status == 422 or status == 413:
        param = _error_param(body)
        field = f"/{param.replace('.', '/')}" if param else ""
        if _error_code(body) == ContextLengthExceeded.code:
            return ContextLengthExceeded(field, message)
        return InvalidModelInput(field, message)
    if status in (429, 503):
        return errors.queue_full(model, 0, 0)
    return errors.replica_failed(model, f"the model server answered {status}: {message}")


def _error_message(body: object) -> str | None:
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body:
        return body[:500]
    return None


def _error_code(body: object) -> object:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"].get("code")
    return None


def _error_param(body: object) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        param = body["error"].get("param")
        return param if isinstance(param, str) else None
    return None


def _decode(content: bytes) -> object:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return content.decode("utf-8", "replace")


async def failure_reason(lease: Lease, exc: BaseException) -> str:
    """Why a transport error happened: the replica's own verdict if it comes in time."""
    for _ in range(int(LEASE_REASON_WAIT / 0.05)):
        if lease.failure is not None:
            return lease.failure
        await asyncio.sleep(0.05)
    text = str(exc) or type(exc).__name__
    return f"{lease.replica.short_name} connection failed ({text})"


async def post_json(
    http: httpx.AsyncClient,
    lease: Lease,
    path: str,
    body: Mapping[str, object],
    headers: Mapping[str, str],
) -> ReplicaAnswer:
    """POST ``body``; the answer, or the lease's failure if the replica dies meanwhile."""
    replica = lease.replica
    task = asyncio.ensure_future(
        http.post(
            f"{replica.url}{path}",
            json=body,
            headers=dict(headers),
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT),
        )
    )
    lease.on_fail = lambda reason: task.cancel()
    try:
        response = await task
    except asyncio.CancelledError:
        if lease.failure is not None and not _cancelling():
            lease.outcome(lease.failure)
            raise errors.replica_failed(replica.model_id, lease.failure) from None
        raise
    except httpx.ConnectError as exc:
        lease.outcome(f"{replica.short_name} refused the connection")
        raise ReplicaUnreachable(str(exc)) from exc
    except httpx.HTTPError as exc:
        reason = await failure_reason(lease, exc)
        lease.outcome(reason)
        raise errors.replica_failed(replica.model_id, reason) from exc
    finally:
        lease.on_fail = None
    if response.status_code == 200:
        # A 200 is the answer itself: one that is not JSON is the replica's fault (3040, as
        # its 500 is), never a success carrying a string. Other statuses keep their text
        # for the refusal's message.
        try:
            body = json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            reason = f"{replica.short_name} answered invalid JSON: {snippet(response.content)}"
            lease.outcome(reason)
            raise errors.replica_failed(replica.model_id, reason) from None
        lease.outcome(None)
        return ReplicaAnswer(200, body, response.headers)
    lease.outcome(_status_failure(replica.short_name, response.status_code))
    return ReplicaAnswer(response.status_code, _decode(response.content), response.headers)


def invalid_json(lease: Lease, data: str) -> errors.UpstreamFailed:
    """The 3040 of a stream event that is not a JSON object, naming the lease's replica."""
    replica = lease.replica
    reason = f"{replica.short_name} answered invalid JSON in its stream: {snippet(data)}"
    return errors.replica_failed(replica.model_id, reason)


def snippet(content: bytes | str) -> str:
    """The start of what a replica sent, quoted, for an error's text."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    return json.dumps(text[:SNIPPET_CHARS] + ("..." if len(text) > SNIPPET_CHARS else ""))


def _status_failure(replica: str, status: int) -> str | None:
    """What an answer's status says of the replica (outlier.py): a 5xx is its fault; a 4xx is
    the request's, and any answer at all shows the replica works."""
    return f"{replica} answered {status}" if status >= 500 else None


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class EventStream:
    """The ``data:`` payloads of a replica's SSE answer (``"[DONE]"`` included).

    Read by its consumer directly (no pump task, no queue: one wake-up per network read, and a
    read takes every event that arrived). When the replica dies or the request times out, the
    lease's ``fail`` cuts the connection, so a read in progress ends at once with that failure.
    """

    def __init__(self, lease: Lease, response: StreamedResponse) -> None:
        self.lease = lease
        self.response = response
        self._buffer = b""
        self._events: deque[str] = deque()
        self._end: object = None  # _END, _CLOSED, or the exception every later read raises
        self._reading = False
        lease.on_fail = lambda reason: response.abort()

    async def _read(self) -> None:
        """Wait for the next bytes and parse their events; at the end or a failure, set _end."""
        self._reading = True
        try:
            chunk = await self.response.next_bytes()
        except WireError as exc:
            if self.lease.failure is None:
                # The consumer asks the replica for its verdict (it may have just died).
                reason = await failure_reason(self.lease, exc)
                self._finish(errors.replica_failed(self.lease.replica.model_id, reason))
                return
            chunk = b""
        finally:
            self._reading = False
        if self.lease.failure is not None:
            self._finish(errors.replica_failed(self.lease.replica.model_id, self.lease.failure))
            return
        if chunk is None:
            if self._buffer.strip():
                self._add(self._buffer)
            self._finish(_END)
            return
        buffer = self._buffer + chunk
        while (end := buffer.find(b"\n\n")) >= 0:
            self._add(buffer[:end])
            buffer = buffer[end + 2 :]
        self._buffer = buffer

    def _add(self, block: bytes) -> None:
        if self._end is not None:
            return  # after an invalid event: nothing more reaches the consumer
        data = _event_data(block)
        if data is None:
            return
        # Every event a replica sends is a JSON object or [DONE]. Checking the framing costs
        # two comparisons on the hot path (a full parse would double the translators' work)
        # and catches what a broken server sends: cut, plain text, HTML.
        if not _framed(data):
            self._finish(invalid_json(self.lease, data))
            return
        self._events.append(data)

    def _finish(self, end: object) -> None:
        if self._end is None:
            self._end = end

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> str:
        while not self._events:
            if self._end is _END:
                raise StopAsyncIteration
            if self._end is not None:
                raise self._failure()
            await self._read()
        return self._events.popleft()

    async def next_batch(self) -> list[str]:
        """Every event available now (at least one; waits for it); [] once the stream ended.

        Under load several events of a stream pile up between reads: handing them on together
        makes fewer, larger chunks for every hop after this one; idle, a batch is one event.
        """
        while not self._events:
            if self._end is _END:
                return []
            if self._end is not None:
                raise self._failure()
            await self._read()
        batch = list(self._events)
        self._events.clear()
        return batch

    def _failure(self) -> BaseException:
        if self._end is _CLOSED:  # (most streams are closed and never read again)
            return errors.replica_failed(self.lease.replica.model_id, "the stream was closed")
        assert isinstance(self._end, BaseException)  # invariant: _finish's only other values
        return self._end

    async def aclose(self) -> None:
        """Stop reading: the connection closes and the replica aborts the generation."""
        self.lease.on_fail = None
        self._finish(_CLOSED)
        if self._reading:  # read in another task (a timeout): cutting the connection ends it
            self.response.abort()
        self.response.close()


def _event_data(block: bytes) -> str | None:
    lines = [
        line[5:].lstrip(b" ")
        for line in block.replace(b"\r\n", b"\n").split(b"\n")
        if line.startswith(b"data:")
    ]
    if not lines:
        return None
    return b"\n".join(lines).decode("utf-8", "replace")


async def open_events(
    wire: WirePool,
    lease: Lease,
    path: str,
    body: Mapping[str, object],
    headers: Mapping[str, str],
) -> EventStream:
    """POST a streaming request; the stream once the replica answered 200, else the refusal."""
    replica = lease.replica
    opening = asyncio.ensure_future(wire.post(f"{replica.url}{path}", body, headers))
    lease.on_fail = lambda reason: opening.cancel()
    try:
        response = await opening
    except asyncio.CancelledError:
        if lease.failure is not None and not _cancelling():
            lease.outcome(lease.failure)
            raise errors.replica_failed(replica.model_id, lease.failure) from None
        raise
    except WireConnectError as exc:
        lease.outcome(f"{replica.short_name} refused the connection")
        raise ReplicaUnreachable(str(exc)) from exc
    except WireError as exc:
        reason = await failure_reason(lease, exc)
        lease.outcome(reason)
        raise errors.replica_failed(replica.model_id, reason) from exc
    finally:
        lease.on_fail = None
    if response.status != 200:
        lease.outcome(_status_failure(replica.short_name, response.status))
        try:
            content = await response.read()
        except WireError:
            content = b""
        finally:
            response.close()
        raise upstream_refusal(replica.model_id, response.status, _decode(content))
    return EventStream(lease, response)


def _framed(data: str) -> bool:
    """Whether an event looks like a JSON object (or is ``[DONE]``)."""
    if data.startswith("{"):
        return data.endswith("}") or data.rstrip().endswith("}")
    return data == "[DONE]"
