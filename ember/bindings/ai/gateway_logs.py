"""AI Gateway logs of the calls made with ``options.gateway``: what ``env.AI.aiGatewayLogId``
names and ``env.AI.gateway(id).getLog`` / ``patchLog`` read and annotate.

A log holds what the platform's ``AiGatewayLog`` holds for a Workers AI call (provider, model,
path, duration, status, success, cached, tokens in and out, metadata, request and response sizes
and heads, created_at) plus the ``feedback`` and ``score`` that ``patchLog`` sets. Logs live in
memory, at most ``MAX_PER_TENANT`` per tenant (the oldest go first). A refused call is logged
too (``success: false``, its status and error body), and its log id reaches the handler with the
error. ``collectLog: false`` gets a log id and stores nothing, as the platform then keeps no log.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ember.bindings.ai.answer import AIAnswer
from ember.bindings.ai.failures import Failure
from ember.bindings.ai.gateway_metadata import gateway_metadata
from ember.bindings.ai.tapped_stream import TappedStream, tokens_of
from ember.errors import InvalidModelInput

MAX_PER_TENANT = 1000
HEAD_CHARS = 2048  # the request and response heads kept in a log
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_log_id(now: float | None = None) -> str:
    """A ULID (48-bit milliseconds, 80 random bits, Crockford base 32): the platform's log ids
    have this shape and sort by time."""
    millis = int((time.time() if now is None else now) * 1000)
    value = (millis << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


@dataclass(slots=True)
class GatewayLog:
    """One logged call; ``as_json`` is ``getLog``'s answer."""

    id: str
    gateway: str
    model: str
    metadata: dict[str, Any]
    request_size: int
    request_head: str
    started: float
    created_at: str
    duration: int = 0
    status_code: int = 200
    success: bool = True
    cached: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    response_size: int = 0
    response_head: str = ""
    response_content_type: str = "application/json"
    feedback: int | None = None
    score: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": "workers-ai",
            "model": self.model,
            "model_type": "text-generation",
            "path": self.model,
            "duration": self.duration,
            "request_type": "workers-ai",
            "request_content_type": "application/json",
            "status_code": self.status_code,
            "response_content_type": self.response_content_type,
            "success": self.success,
            "cached": self.cached,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "metadata": dict(self.metadata),
            "step": 0,
            "cost": 0,  # a local model costs nothing per token
            "custom_cost": False,
            "request_size": self.request_size,
            "request_head": self.request_head,
            "request_head_complete": len(self.request_head.encode("utf-8")) == self.request_size,
            "response_size": self.response_size,
            "response_head": self.response_head,
            "response_head_complete": self.response_size <= HEAD_CHARS,
            "created_at": self.created_at,
            "feedback": self.feedback,
            "score": self.score,
        }


class GatewayLogs:
    """Every tenant's gateway logs, bounded per tenant."""

    def __init__(self, per_tenant: int = MAX_PER_TENANT) -> None:
        self._per_tenant = per_tenant
        self._logs: dict[str, OrderedDict[str, GatewayLog]] = {}

    def start(
        self, gateway: str, model: str, inputs: Mapping[str, Any], metadata: Mapping[str, Any]
    ) -> GatewayLog:
        """A log for a call about to run (stored by ``answered``)."""
        request = json.dumps(inputs, ensure_ascii=False)
        now = time.time()
        return GatewayLog(
            id=new_log_id(now),
            gateway=gateway,
            model=model,
            metadata=dict(metadata),
            request_size=len(request.encode("utf-8")),
            request_head=request[:HEAD_CHARS],
            started=time.monotonic(),
            created_at=datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z"),
        )

    def answered(self, tenant: str, log: GatewayLog, answer: AIAnswer, keep: bool) -> AIAnswer:
        """``answer`` with its ``cf-aig-log-id`` header; ``keep``: store the log (collectLog).
        A streamed answer's log is completed when the stream ends."""
        answer.headers["cf-aig-log-id"] = log.id
        log.cached = answer.headers.get("cf-aig-cache-status") == "HIT"
        log.status_code = answer.status
        if answer.stream is not None:
            log.response_content_type = "text/event-stream"
            answer.stream = _LoggedStream(answer.stream, log)
        else:
            _finish(log, answer.body or b"", answer.body or b"")
        if keep:
            self._store(tenant, log)
        return answer

    def failed(self, tenant: str, log: GatewayLog, failure: Failure, keep: bool) -> Failure:
        """``failure`` naming its log, stored as a failed call when ``keep``: the platform's
        gateway logs refused calls too, and its binding reads the log id before the status."""
        log.status_code = failure.status
        log.success = False
        body = json.dumps(failure.to_data(), ensure_ascii=False).encode("utf-8")
        _finish(log, body, b"")
        if keep:
            self._store(tenant, log)
        return replace(failure, log_id=log.id)

    def get(self, tenant: str, gateway: str, log_id: object) -> GatewayLog | None:
        found = self._logs.get(tenant, {}).get(log_id) if isinstance(log_id, str) else None
        return found if found is not None and found.gateway == gateway else None

    def patch(self, log: GatewayLog, data: object) -> None:
        """``patchLog``'s ``{feedback?, score?, metadata?}`` (validated; null clears)."""
        if not isinstance(data, Mapping):
            raise InvalidModelInput("/", "patchLog expects {feedback?, score?, metadata?}")
        unknown = sorted(set(data) - {"feedback", "score", "metadata"})
        if unknown:
            raise InvalidModelInput(
                "/", f"patchLog: unknown field(s) {unknown}: expected feedback, score, metadata"
            )
        if "feedback" in data:
            feedback = data["feedback"]
            if feedback in ("1", "-1"):
                feedback = int(feedback)  # type: ignore[arg-type]
            if feedback not in (None, 1, -1) or isinstance(feedback, bool):
                raise InvalidModelInput("/feedback", "patchLog: feedback is -1, 1 or null")
            log.feedback = feedback  # type: ignore[assignment]
        if "score" in data:
            score = data["score"]
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, int | float)
            ):
                raise InvalidModelInput("/score", "patchLog: score is a number or null")
            log.score = score
        if "metadata" in data:
            log.metadata = gateway_metadata(data["metadata"], "/metadata")

    def _store(self, tenant: str, log: GatewayLog) -> None:
        logs = self._logs.setdefault(tenant, OrderedDict())
        logs[log.id] = log
        while len(logs) > self._per_tenant:
            logs.popitem(last=False)


def _finish(log: GatewayLog, head: bytes, tail: bytes, size: int | None = None) -> None:
    log.duration = round((time.monotonic() - log.started) * 1000)
    log.response_size = len(head) if size is None else size
    log.response_head = head[:HEAD_CHARS].decode("utf-8", "replace")
    tokens_in, tokens_out = tokens_of(tail)
    if tokens_in is not None:
        log.tokens_in = tokens_in
    if tokens_out is not None:
        log.tokens_out = tokens_out


class _LoggedStream(TappedStream):
    """A streamed answer passed through unchanged; its log is completed at the end (or on
    failure or ``aclose``) with the size, head and the usage of its final event."""

    def __init__(self, chunks: AsyncIterator[bytes], log: GatewayLog) -> None:
        super().__init__(chunks, head_bytes=HEAD_CHARS)
        self._log = log

    def finish(self) -> None:
        _finish(self._log, bytes(self.head), self.tail, self.size)
        if self.failure_code is not None:  # failed midway: its 200 went out, the call failed
            self._log.success = False
